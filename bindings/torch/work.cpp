#include "bindings/torch/work.hpp"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace loom::torch {
namespace {

// The CUDA devices of `tensors`: a future of CUDA tensors must name them, so
// that whoever waits on it from a stream is ordered after the result.
std::vector<c10::Device> cudaDevicesOf(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> devices;
  for (const auto& t : tensors) {
    if (t.device().is_cuda() && std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  return devices;
}

}  // namespace

LoomWork::LoomWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
                   std::chrono::milliseconds timeout)
    : Work(rank, type),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       cudaDevicesOf(outputs_))) {}

bool LoomWork::isCompleted() {
  std::lock_guard lock(mutex_);
  return completed_;
}

bool LoomWork::isSuccess() const {
  std::lock_guard lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr LoomWork::exception() const {
  std::lock_guard lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> LoomWork::result() { return outputs_; }

bool LoomWork::wait(std::chrono::milliseconds timeout) {
  const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, limit, [&] { return completed_; })) {
    // " timeout ": the word PyTorch's own tests (and users' scripts) look for.
    TORCH_CHECK(false, "loom: ", what_, " did not complete within the timeout of ", limit.count(), " ms");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void LoomWork::complete(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    completed_ = true;
    exception_ = error;
  }
  cv_.notify_all();
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace loom::torch
