// Loom as a torch.distributed backend ("loom"): a c10d::ProcessGroup whose
// operations run on Loom, over <loom/loom.h> alone. The group's communicator
// is made from a unique id that rank 0 publishes in the c10d store the group
// was given (each group its own prefix of it), with the group's timeout as
// Loom's. Operations are queued, in call order, on the group's worker thread
// (its stream), which runs each as one Loom call (a group of them for the
// list forms) and completes its Work and future; the caller returns at once.
//
// Tensors: CPU, dense, contiguous; every dtype Loom has (float64, float32,
// float16, bfloat16, int64, int32, int8, uint8), bool (as uint8, sum as
// max, product as min, NCCL's mapping) and complex (as pairs of reals; sum
// and average only). Reductions: SUM, AVG, PRODUCT, MIN,
// MAX and PREMUL_SUM; the bitwise ones are refused by name. Send and recv pair
// in call order (tags are not matched, as in NCCL); a receive from any source
// is refused.
#pragma once

#include <loom/loom.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bindings/torch/work.hpp"

namespace loom::torch {

// The first failure among the calls of one Loom group.
struct FirstFailure {
  loomResult_t result = loomSuccess;
  void operator()(loomResult_t r) {
    if (result == loomSuccess) result = r;
  }
};

class ProcessGroupLoom final : public c10d::ProcessGroup {
 public:
  ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupLoom() override;

  // What torch.distributed.Backend.register_backend calls.
  static c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                       int size, const std::chrono::duration<float>& timeout);

  const std::string getBackendName() const override { return "loom"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // batch_isend_irecv: the sends and receives between these two run as one
  // Loom group, so that ranks may post them in any order without waiting on
  // each other (two ranks that each receive first would otherwise deadlock).
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;

 private:
  // Queues `run` on the worker; the Work completes when it returns, or
  // fails with what it threw.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
                                         std::function<void()> run);
  void work();
  // byRank[r][i] <- input i of rank r, for allgather and allgather_coalesced.
  c10::intrusive_ptr<c10d::Work> gatherEach(std::vector<std::vector<at::Tensor>>& byRank,
                                            std::vector<at::Tensor>& inputs, c10d::OpType type, const char* what);
  // Throws std::runtime_error with Loom's message unless `result` is loomSuccess.
  void check(loomResult_t result) const;
  // Runs `calls` (Loom calls, each result given to the FirstFailure) as one
  // Loom group, then throws the first failure of the calls or of the group.
  void inGroup(const std::function<void(FirstFailure&)>& calls) const;

  loomComm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  struct Task {
    std::vector<c10::intrusive_ptr<LoomWork>> works;  // completed together when run returns
    std::function<void()> run;
  };
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> queue_;
  std::optional<std::vector<Task>> coalescing_;  // between startCoalescing and endCoalescing
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace loom::torch
