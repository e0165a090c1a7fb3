// Loom as a torch.distributed backend ("loom"): the c10d::Backend (in
// PyTorch 2; 1.13's plug-ins subclass c10d::ProcessGroup itself) whose
// operations run on Loom, over <loom/loom.h> alone. The group's communicator
// is made from a unique id that rank 0 publishes in the c10d store the group
// was given (each group its own prefix of it), with the group's timeout as
// Loom's. Operations are queued, in call order, on the group's worker thread
// (its stream), which runs each as one Loom call (a group of them for the
// list forms) and completes its Work and future; the caller returns at once.
//
// Tensors: dense and contiguous, on the CPU or a CUDA device (one device
// per call; Loom reads and writes device memory where it is built with
// CUDA, and says so by name where it is not). A call on CUDA tensors runs
// once the caller's current stream has reached it (stream_fence.hpp), and
// its Work completes once the result is in place, whatever stream reads it
// next. Every dtype Loom has (float64, float32,
// float16, bfloat16, int64, int32, int8, uint8), bool (as uint8, sum as
// max, product as min, NCCL's mapping) and complex (as pairs of reals; sum
// and average only). Reductions: SUM, AVG, PRODUCT, MIN,
// MAX and PREMUL_SUM; the bitwise ones are refused by name. Send and recv pair
// in call order (tags are not matched, as in NCCL); a receive from any source
// is refused.
#pragma once

#include <loom/loom.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bindings/torch/stream_fence.hpp"
#include "bindings/torch/work.hpp"

namespace loom::torch {

// The first failure among the calls of one Loom group.
struct FirstFailure {
  loomResult_t result = loomSuccess;
  void operator()(loomResult_t r) {
    if (result == loomSuccess) result = r;
  }
};

// What a plug-in backend subclasses: PyTorch 2's ProcessGroup holds one
// Backend per device type, 1.13's was the backend itself.
#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

class ProcessGroupLoom final : public BackendBase {
 public:
  ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupLoom() override;

  // What torch.distributed.Backend.register_backend calls.
  static c10::intrusive_ptr<BackendBase> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
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
  // The end of a batch has changed form: 1.13 and 2.0 pass the requests,
  // later versions take the batch's one Work back, and ask
  // supportsCoalescing() before they coalesce CPU tensors at all. These are
  // declared without `override` so that each overrides its base's virtual
  // in the versions that have it, and is a plain member in the others.
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs);
  c10::intrusive_ptr<c10d::Work> endCoalescing();
  bool supportsCoalescing() const { return true; }

#if TORCH_VERSION_MAJOR >= 2
  // PyTorch 2's coalesced forms of all_gather_into_tensor and
  // reduce_scatter_tensor (FSDP's): pair i as _allgather_base
  // (_reduce_scatter_base) would run it, all pairs in one Loom group.
  // Without `override` for the same reason as above.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts);
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts);
#endif

 private:
  // Queues `run` on the worker; the Work completes when it returns, or
  // fails with what it threw. CUDA tensors among `outputs` (or `inputs`,
  // for a call whose rank has no output) make it wait for the caller's
  // stream first. Inside a batch (startCoalescing to endCoalescing) sends
  // and receives join it; a call that is a Loom group of its own
  // (`wholeGroup`: the coalesced forms, which PyTorch 2's coalescing
  // manager issues inside a batch) is queued in turn; anything else is refused.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
                                         std::function<void()> run, const std::vector<at::Tensor>& inputs = {},
                                         bool wholeGroup = false);
  // The batch that startCoalescing began, queued as one task; its Work, or
  // null for an empty batch.
  c10::intrusive_ptr<LoomWork> queueBatch();
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
    std::string what;
    StreamFence ready;  // the caller's stream at the call, for CUDA tensors
  };
  // One task on the worker: after its fence, on its device, and finished
  // there (the worker's own copies included) when it returns.
  void runTask(const Task& task) const;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> queue_;
  std::optional<std::vector<Task>> coalescing_;  // between startCoalescing and endCoalescing
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace loom::torch
