// One operation of the loom process group, as torch sees it: a c10d::Work
// that its group's worker completes (or fails) once Loom has run it, with a
// future of the operation's output tensors for DDP's communication hooks.
// A wait has a deadline: the process group's timeout, or the one given.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <exception>
#include <string>
#include <vector>

namespace loom::torch {

class LoomWork final : public c10d::Work {
 public:
  LoomWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
           std::chrono::milliseconds timeout);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  // Waits up to `timeout` (kNoTimeout: the group's), then rethrows the
  // operation's error, or throws one naming the operation and the time.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // The worker's: the operation ran (error null) or failed.
  void complete(std::exception_ptr error);

 private:
  std::string what_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace loom::torch
