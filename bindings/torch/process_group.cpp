#include "bindings/torch/process_group.hpp"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

namespace loom::torch {
namespace {

constexpr const char* kIdKey = "loom_unique_id";

loomDataType_t loomType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kDouble: return loomFloat64;
    case at::kFloat: return loomFloat32;
    case at::kHalf: return loomFloat16;
    case at::kBFloat16: return loomBfloat16;
    case at::kLong: return loomInt64;
    case at::kInt: return loomInt32;
    case at::kChar: return loomInt8;
    case at::kByte:
    case at::kBool: return loomUint8;  // one byte, 0 or 1
    case at::kComplexFloat: return loomFloat32;  // as (real, imaginary) pairs
    case at::kComplexDouble: return loomFloat64;
    default: TORCH_CHECK(false, "loom: tensors of ", t.scalar_type(), " are not a type Loom moves or reduces");
  }
}

// A tensor Loom may read and write in place.
void requireUsable(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.layout() == at::kStrided, "loom: ", what, ": sparse tensors are not supported");
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "loom: ", what, ": ", t.device(),
              " tensors: Loom moves CPU and CUDA tensors");
  TORCH_CHECK(t.is_contiguous(), "loom: ", what, ": tensors must be contiguous");
}

void requireSame(const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "loom: ", what, ": ", a.scalar_type(), " and ", b.scalar_type(),
              " tensors in one call");
  TORCH_CHECK(a.device() == b.device(), "loom: ", what, ": tensors on ", a.device(), " and ", b.device(),
              " in one call");
}

void requireOne(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "loom: ", what, " takes one tensor per rank, not ", tensors.size());
  requireUsable(tensors[0], what);
}

// A reduction as Loom runs it on `t`'s type: PREMUL_SUM with its factor in
// that type; bool's SUM and PRODUCT as uint8's MAX and MIN (or and and).
struct Reduction {
  loomRedOp_t op = loomSum;
  at::Tensor factor;  // PREMUL_SUM's, one element of t's type
};

// PREMUL_SUM's factor, on the CPU: a tensor where the caller gave one,
// else the double. PyTorch 1.13 keeps tensors per device
// (tensor_factors); 2.x keeps one (tensor_factor, undefined when none):
// whichever member this PyTorch has is read.
template <class Supplement>
at::Tensor premulFactor(const Supplement& s) {
  if constexpr (requires { s.tensor_factor; }) {
    return s.tensor_factor.defined() ? s.tensor_factor.to(at::kCPU) : at::scalar_tensor(s.double_factor, at::kDouble);
  } else {
    return s.tensor_factors.empty() ? at::scalar_tensor(s.double_factor, at::kDouble) : s.tensor_factors[0].to(at::kCPU);
  }
}

Reduction reductionFor(const c10d::ReduceOp& reduceOp, const at::Tensor& t, const char* what) {
  Reduction r;
  const bool boolean = t.scalar_type() == at::kBool;
  // Complex numbers add (and average) as pairs of reals; nothing else of them is element-wise.
  TORCH_CHECK(!t.is_complex() || reduceOp.op_ == c10d::ReduceOp::SUM || reduceOp.op_ == c10d::ReduceOp::AVG,
              "loom: ", what, ": complex tensors reduce by SUM or AVG only");
  switch (reduceOp.op_) {
    case c10d::ReduceOp::SUM: r.op = boolean ? loomMax : loomSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = boolean ? loomMin : loomProd; break;
    case c10d::ReduceOp::MIN: r.op = loomMin; break;
    case c10d::ReduceOp::MAX: r.op = loomMax; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!boolean, "loom: ", what, ": AVG of bool tensors");
      r.op = loomAvg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      const auto* supplement = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(reduceOp.supplement_.get());
      TORCH_CHECK(supplement != nullptr, "loom: ", what, ": PREMUL_SUM without its factor");
      r.factor = premulFactor(*supplement).to(t.scalar_type()).reshape({1}).contiguous();
      break;
    }
    default:
      TORCH_CHECK(false, "loom: ", what, ": reduction ", static_cast<int>(reduceOp.op_),
                  " (a bitwise one) is not one Loom has (SUM, AVG, PRODUCT, MIN, MAX, PREMUL_SUM)");
  }
  return r;
}

// Elements of loomType(t) in one element of t: a complex number is two.
size_t perElement(const at::Tensor& t) { return t.is_complex() ? 2 : 1; }

// Elements of loomType(t) in t.
size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * perElement(t); }

// The Loom operator of `r` on t's type for one call: PREMUL_SUM's is
// created with its factor and destroyed after.
class ScopedOp {
 public:
  ScopedOp(const Reduction& r, const at::Tensor& t, loomComm_t comm) : op_(r.op), comm_(comm) {
    if (!r.factor.defined()) return;
    if (loomRedOpCreatePreMulSum(&op_, r.factor.data_ptr(), loomType(t), loomScalarHostImmediate, comm) !=
        loomSuccess) {
      throw std::runtime_error(std::string("loom: ") + loomGetLastError(comm));
    }
    created_ = true;
  }
  ~ScopedOp() {
    if (created_) loomRedOpDestroy(op_, comm_);
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;
  loomRedOp_t get() const { return op_; }

 private:
  loomRedOp_t op_;
  loomComm_t comm_;
  bool created_ = false;
};

}  // namespace

ProcessGroupLoom::ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : BackendBase(rank, size), timeout_(timeout) {
  loomUniqueId id;
  if (rank == 0) {
    check(loomGetUniqueId(&id));
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store->set(kIdKey, std::vector<uint8_t>(bytes, bytes + sizeof id));
  } else {
    const std::vector<uint8_t> bytes = store->get(kIdKey);  // waits, up to the store's timeout
    TORCH_CHECK(bytes.size() == sizeof id, "loom: the store's ", kIdKey, " holds ", bytes.size(), " bytes, not ",
                sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::min<int64_t>(timeout.count(), INT32_MAX));
  if (loomCommInitRankConfig(&comm_, size, id, rank, &config) != loomSuccess) {
    TORCH_CHECK(false, "loom: init of rank ", rank, " of ", size, ": ", loomGetLastError(nullptr));
  }
  worker_ = std::thread([this] { work(); });
}

ProcessGroupLoom::~ProcessGroupLoom() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  {
    // Python drops the group holding the GIL, and the worker may need it:
    // the last reference to a tensor that Python saw frees its PyObject.
    std::optional<pybind11::gil_scoped_release> unlocked;
    if (Py_IsInitialized() != 0 && PyGILState_Check() != 0) unlocked.emplace();
    worker_.join();  // runs what is queued first: NCCL's groups finish their work too
  }
  if (comm_ != nullptr) {
    loomResult_t state = loomSuccess;
    loomCommGetAsyncError(comm_, &state);
    if (state == loomSuccess) loomCommDestroy(comm_);
    else loomCommAbort(comm_);
  }
}

c10::intrusive_ptr<BackendBase> ProcessGroupLoom::create(const c10::intrusive_ptr<c10d::Store>& store,
                                                                int rank, int size,
                                                                const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<ProcessGroupLoom>(
      store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

void ProcessGroupLoom::check(loomResult_t result) const {
  if (result == loomTimeout) {
    throw std::runtime_error(std::string("loom: the group's timeout passed: ") + loomGetLastError(comm_));
  }
  if (result != loomSuccess) throw std::runtime_error(std::string("loom: ") + loomGetLastError(comm_));
}

void ProcessGroupLoom::inGroup(const std::function<void(FirstFailure&)>& calls) const {
  check(loomGroupStart());
  FirstFailure failed;
  calls(failed);
  const loomResult_t end = loomGroupEnd();
  check(failed.result);
  check(end);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::enqueue(c10d::OpType type, std::string what,
                                                         std::vector<at::Tensor> outputs, std::function<void()> run,
                                                         const std::vector<at::Tensor>& inputs, bool wholeGroup) {
  StreamFence ready;
  const auto fenceFor = [&](const std::vector<at::Tensor>& tensors) {
    for (const auto& t : tensors) {
      if (!t.device().is_cuda()) continue;
      if (!ready.device()) ready = StreamFence(t.device());
      TORCH_CHECK(t.device() == *ready.device(), "loom: ", what, ": tensors on ", *ready.device(), " and ",
                  t.device(), " in one call (one CUDA device per call)");
    }
  };
  fenceFor(outputs);
  fenceFor(inputs);
  auto work = c10::make_intrusive<LoomWork>(getRank(), type, what, std::move(outputs), timeout_);
  Task task{{work}, std::move(run), std::move(what), std::move(ready)};
  {
    std::lock_guard lock(mutex_);
    if (coalescing_ && !wholeGroup) {
      // A Loom group defers sends and receives alone to its end; anything
      // else would run (and copy its results) before its data had moved.
      TORCH_CHECK(type == c10d::OpType::SEND || type == c10d::OpType::RECV, "loom: ", task.what,
                  " inside batch_isend_irecv: only isend and irecv may be coalesced");
      coalescing_->push_back(std::move(task));
      return work;
    }
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return work;
}

void ProcessGroupLoom::startCoalescing() {
  std::lock_guard lock(mutex_);
  TORCH_CHECK(!coalescing_, "loom: startCoalescing: already coalescing (batch_isend_irecv does not nest)");
  coalescing_.emplace();
}

void ProcessGroupLoom::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) { queueBatch(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::endCoalescing() {
  c10::intrusive_ptr<LoomWork> batch = queueBatch();
  if (batch) return batch;
  // No sends or receives: the coalescing manager's fast path issued one
  // coalesced call (queued in turn) or nothing. A task that does nothing
  // completes after whatever was queued before it.
  return enqueue(c10d::OpType::UNKNOWN, "a coalesced batch", {}, [] {});
}

c10::intrusive_ptr<LoomWork> ProcessGroupLoom::queueBatch() {
  std::lock_guard lock(mutex_);
  TORCH_CHECK(coalescing_, "loom: endCoalescing without startCoalescing");
  Task batch;
  std::vector<std::function<void()>> runs;
  std::vector<at::Tensor> outputs;
  for (Task& t : *coalescing_) {
    batch.works.push_back(t.works[0]);
    for (const auto& o : t.works[0]->result()) outputs.push_back(o);
    runs.push_back(std::move(t.run));
    // Every call was queued on the caller's stream in turn: the last fence is behind them all.
    if (t.ready.device()) batch.ready = t.ready;
  }
  coalescing_.reset();
  if (runs.empty()) return {};
  // The whole batch's Work, for PyTorch 2's endCoalescing; completed with the others.
  auto whole = c10::make_intrusive<LoomWork>(getRank(), c10d::OpType::UNKNOWN, "batch_isend_irecv",
                                             std::move(outputs), timeout_);
  batch.works.push_back(whole);
  batch.what = "batch_isend_irecv";
  batch.run = [this, runs = std::move(runs)] {
    check(loomGroupStart());
    std::exception_ptr first;
    for (const auto& run : runs) {
      try {
        run();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    const loomResult_t end = loomGroupEnd();
    if (first) std::rethrow_exception(first);
    check(end);
  };
  queue_.push_back(std::move(batch));
  ready_.notify_one();
  return whole;
}

void ProcessGroupLoom::runTask(const Task& task) const {
  const auto device = task.ready.device();
  if (!device) {
    task.run();
    return;
  }
  const auto notReached = [&](const char* when) {
    return std::runtime_error("loom: " + task.what + ": the CUDA stream did not get " + when + " within the timeout of " +
                              std::to_string(timeout_.count()) + " ms");
  };
  if (!task.ready.waitUntil(std::chrono::steady_clock::now() + timeout_)) throw notReached("to the call");
  const c10::DeviceGuard onDevice(*device);
  task.run();
  // Loom's calls have finished on the device when they return; the copies
  // the worker queued itself (a gather's pieces into the caller's tensors)
  // are on its current stream.
  if (!StreamFence(*device).waitUntil(std::chrono::steady_clock::now() + timeout_)) {
    throw notReached("past the worker's copies");
  }
}

void ProcessGroupLoom::work() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      runTask(task);
    } catch (...) {
      error = std::current_exception();
    }
    for (const auto& work : task.works) work->complete(error);
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  requireOne(tensors, "broadcast");
  const at::Tensor t = tensors[0];
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, "broadcast", tensors, [this, t, root] {
    check(loomBroadcast(t.data_ptr(), t.data_ptr(), count(t), loomType(t), root, comm_, nullptr));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  requireOne(tensors, "allreduce");
  const at::Tensor t = tensors[0];
  const Reduction r = reductionFor(opts.reduceOp, t, "allreduce");
  return enqueue(c10d::OpType::ALLREDUCE, "allreduce", tensors, [this, t, r] {
    const ScopedOp op(r, t, comm_);
    check(loomAllReduce(t.data_ptr(), t.data_ptr(), count(t), loomType(t), op.get(), comm_, nullptr));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "loom: allreduce_coalesced of no tensors");
  std::vector<Reduction> reductions;
  for (const auto& t : tensors) {
    requireUsable(t, "allreduce_coalesced");
    TORCH_CHECK(opts.reduceOp.op_ != c10d::ReduceOp::PREMUL_SUM, "loom: allreduce_coalesced with PREMUL_SUM");
    reductions.push_back(reductionFor(opts.reduceOp, t, "allreduce_coalesced"));
  }
  const auto run = [this, tensors, reductions] {
    inGroup([&](FirstFailure& failed) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        const at::Tensor& t = tensors[i];
        failed(loomAllReduce(t.data_ptr(), t.data_ptr(), count(t), loomType(t), reductions[i].op, comm_, nullptr));
      }
    });
  };
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, run, {}, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  requireOne(tensors, "reduce");
  const at::Tensor t = tensors[0];
  const Reduction r = reductionFor(opts.reduceOp, t, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, "reduce", tensors, [this, t, r, root] {
    const ScopedOp op(r, t, comm_);
    check(loomReduce(t.data_ptr(), t.data_ptr(), count(t), loomType(t), op.get(), root, comm_, nullptr));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& /*opts*/) {
  requireOne(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "loom: allgather takes one output list per input, not ", outputs.size());
  std::vector<std::vector<at::Tensor>> byRank;
  for (const auto& o : outputs[0]) byRank.push_back({o});
  return gatherEach(byRank, inputs, c10d::OpType::ALLGATHER, "allgather");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& /*opts*/) {
  requireUsable(output, "_allgather_base");
  requireUsable(input, "_allgather_base");
  requireSame(output, input, "_allgather_base");
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "loom: _allgather_base: the output holds ",
              output.numel(), " elements, not world size x ", input.numel());
  const at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output}, [this, in, out] {
    check(loomAllGather(in.data_ptr(), out.data_ptr(), count(in), loomType(in), comm_, nullptr));
  });
}

// outputs[r][i]: input i of rank r (c10d's order for the coalesced form).
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& /*opts*/) {
  return gatherEach(outputs, inputs, c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced");
}

// Each input gathered into a flat buffer of its own, all in one Loom group,
// then copied into byRank[r][i].
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::gatherEach(std::vector<std::vector<at::Tensor>>& byRank,
                                                            std::vector<at::Tensor>& inputs, c10d::OpType type,
                                                            const char* what) {
  TORCH_CHECK(!inputs.empty(), "loom: ", what, " of no tensors");
  TORCH_CHECK(static_cast<int>(byRank.size()) == getSize(), "loom: ", what, ": outputs for ", byRank.size(),
              " ranks, not ", getSize());
  std::vector<at::Tensor> flats, all;
  for (size_t i = 0; i < inputs.size(); ++i) requireUsable(inputs[i], what);
  for (const auto& ofRank : byRank) {
    TORCH_CHECK(ofRank.size() == inputs.size(), "loom: ", what, ": ", ofRank.size(), " outputs of a rank for ",
                inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      requireSame(ofRank[i], inputs[i], what);
      TORCH_CHECK(ofRank[i].numel() == inputs[i].numel(), "loom: ", what, ": outputs must be as large as the input");
      all.push_back(ofRank[i]);
    }
  }
  for (const auto& in : inputs) flats.push_back(at::empty({in.numel() * getSize()}, in.options()));
  const std::vector<std::vector<at::Tensor>> outs = byRank;
  return enqueue(type, what, all, [this, inputs, outs, flats] {
    inGroup([&](FirstFailure& failed) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        failed(loomAllGather(inputs[i].data_ptr(), flats[i].data_ptr(), count(inputs[i]), loomType(inputs[i]), comm_,
                             nullptr));
      }
    });
    for (size_t r = 0; r < outs.size(); ++r) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        at::Tensor o = outs[r][i];
        const int64_t n = inputs[i].numel();
        o.copy_(flats[i].narrow(0, static_cast<int64_t>(r) * n, n).view_as(o));
      }
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  requireOne(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs;
  if (getRank() == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "loom: gather: the root needs one list of ", getSize(), " output tensors");
    for (const auto& o : outputs[0]) {
      requireSame(o, in, "gather");
      TORCH_CHECK(o.numel() == in.numel(), "loom: gather: outputs must be as large as the input");
    }
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "loom: gather: only the root has outputs");
  }
  const at::Tensor flat = getRank() == root ? at::empty({in.numel() * getSize()}, in.options()) : at::Tensor();
  return enqueue(c10d::OpType::GATHER, "gather", outs, [this, in, outs, flat, root] {
    check(loomGather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, count(in), loomType(in), root, comm_,
                     nullptr));
    for (size_t r = 0; r < outs.size(); ++r) {
      at::Tensor o = outs[r];
      o.copy_(flat.narrow(0, static_cast<int64_t>(r) * in.numel(), in.numel()).view_as(o));
    }
  }, {in});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  requireOne(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor out = outputs[0];
  at::Tensor flat;
  if (getRank() == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "loom: scatter: the root needs one list of ", getSize(), " input tensors");
    std::vector<at::Tensor> pieces;
    for (const auto& i : inputs[0]) {
      requireSame(i, out, "scatter");
      TORCH_CHECK(i.numel() == out.numel(), "loom: scatter: inputs must be as large as the output");
      pieces.push_back(i.reshape({-1}));
    }
    flat = at::cat(pieces);
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "loom: scatter: only the root has inputs");
  }
  return enqueue(c10d::OpType::SCATTER, "scatter", outputs, [this, out, flat, root] {
    check(loomScatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), count(out), loomType(out), root,
                      comm_, nullptr));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  requireOne(outputs, "reduce_scatter");
  const at::Tensor out = outputs[0];
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "loom: reduce_scatter needs one list of ", getSize(), " input tensors");
  std::vector<at::Tensor> pieces;
  for (const auto& i : inputs[0]) {
    requireSame(i, out, "reduce_scatter");
    TORCH_CHECK(i.numel() == out.numel(), "loom: reduce_scatter: inputs must be as large as the output");
    pieces.push_back(i.reshape({-1}));
  }
  at::Tensor flat = at::cat(pieces);
  return _reduce_scatter_base(outputs[0], flat, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  requireUsable(output, "reduce_scatter");
  requireUsable(input, "reduce_scatter");
  requireSame(output, input, "reduce_scatter");
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "loom: reduce_scatter: the input holds ", input.numel(),
              " elements, not world size x ", output.numel());
  const Reduction r = reductionFor(opts.reduceOp, output, "reduce_scatter");
  const at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter", {output}, [this, in, out, r] {
    const ScopedOp op(r, out, comm_);
    check(loomReduceScatter(in.data_ptr(), out.data_ptr(), count(out), loomType(out), op.get(), comm_, nullptr));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions& /*opts*/) {
  requireUsable(output, "alltoall");
  requireUsable(input, "alltoall");
  requireSame(output, input, "alltoall");
  const int n = getSize();
  const at::Tensor in = input, out = output;
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(in.numel() % n == 0 && out.numel() == in.numel(), "loom: alltoall: ", in.numel(),
                " elements do not split into ", n, " equal blocks (or the output is another size)");
    return enqueue(c10d::OpType::ALLTOALL_BASE, "alltoall", {output}, [this, in, out, n] {
      check(loomAlltoAll(in.data_ptr(), out.data_ptr(), count(in) / static_cast<size_t>(n), loomType(in), comm_,
                         nullptr));
    });
  }
  // Uneven splits of dimension 0: a send and a receive per peer, in one group.
  const auto offsets = [n](const at::Tensor& t, std::vector<int64_t> splits, const char* which) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) splits.assign(static_cast<size_t>(n), rows / n);
    TORCH_CHECK(static_cast<int>(splits.size()) == n, "loom: alltoall: ", splits.size(), " ", which,
                " splits for ", n, " ranks");
    int64_t sum = 0;
    for (int64_t s : splits) sum += s;
    TORCH_CHECK(sum == rows, "loom: alltoall: the ", which, " splits add up to ", sum, ", not ", rows, " rows");
    const int64_t rowElements = rows == 0 ? 0 : t.numel() / rows;
    std::vector<std::pair<int64_t, int64_t>> out;  // (first element, elements) per peer
    int64_t at = 0;
    for (int64_t s : splits) {
      out.emplace_back(at * rowElements, s * rowElements);
      at += s;
    }
    return out;
  };
  const auto sends = offsets(in, inputSplits, "input");
  const auto recvs = offsets(out, outputSplits, "output");
  return enqueue(c10d::OpType::ALLTOALL_BASE, "alltoall", {output}, [this, in, out, sends, recvs, n] {
    const size_t element = static_cast<size_t>(in.element_size());
    const size_t per = perElement(in);
    inGroup([&](FirstFailure& failed) {
      for (int p = 0; p < n; ++p) {
        const auto [sendAt, sendCount] = sends[static_cast<size_t>(p)];
        const auto [recvAt, recvCount] = recvs[static_cast<size_t>(p)];
        failed(loomSend(static_cast<const char*>(in.data_ptr()) + static_cast<size_t>(sendAt) * element,
                        static_cast<size_t>(sendCount) * per, loomType(in), p, comm_, nullptr));
        failed(loomRecv(static_cast<char*>(out.data_ptr()) + static_cast<size_t>(recvAt) * element,
                        static_cast<size_t>(recvCount) * per, loomType(out), p, comm_, nullptr));
      }
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& /*opts*/) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() && outputs.size() == inputs.size(),
              "loom: alltoall takes a list of ", getSize(), " inputs and as many outputs");
  for (size_t p = 0; p < inputs.size(); ++p) {
    requireUsable(inputs[p], "alltoall");
    requireUsable(outputs[p], "alltoall");
    requireSame(inputs[p], outputs[p], "alltoall");
  }
  return enqueue(c10d::OpType::ALLTOALL, "alltoall", outputs, [this, inputs, outputs] {
    inGroup([&](FirstFailure& failed) {
      for (size_t p = 0; p < inputs.size(); ++p) {
        const int peer = static_cast<int>(p);
        failed(loomSend(inputs[p].data_ptr(), count(inputs[p]), loomType(inputs[p]), peer, comm_, nullptr));
        failed(loomRecv(outputs[p].data_ptr(), count(outputs[p]), loomType(outputs[p]), peer, comm_, nullptr));
      }
    });
  });
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& /*opts*/) {
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "loom: allgather_into_tensor_coalesced takes as ",
              "many outputs as inputs, one or more, not ", outputs.size(), " and ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    requireUsable(outputs[i], "allgather_into_tensor_coalesced");
    requireUsable(inputs[i], "allgather_into_tensor_coalesced");
    requireSame(outputs[i], inputs[i], "allgather_into_tensor_coalesced");
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * getSize(), "loom: allgather_into_tensor_coalesced: output ",
                i, " holds ", outputs[i].numel(), " elements, not world size x ", inputs[i].numel());
  }
  const auto run = [this, inputs, outputs] {
    inGroup([&](FirstFailure& failed) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        failed(loomAllGather(inputs[i].data_ptr(), outputs[i].data_ptr(), count(inputs[i]), loomType(inputs[i]),
                             comm_, nullptr));
      }
    });
  };
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, "allgather_into_tensor_coalesced", outputs, run, inputs, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "loom: reduce_scatter_tensor_coalesced takes as ",
              "many outputs as inputs, one or more, not ", outputs.size(), " and ", inputs.size());
  TORCH_CHECK(opts.reduceOp.op_ != c10d::ReduceOp::PREMUL_SUM, "loom: reduce_scatter_tensor_coalesced with PREMUL_SUM");
  std::vector<Reduction> reductions;
  for (size_t i = 0; i < inputs.size(); ++i) {
    requireUsable(outputs[i], "reduce_scatter_tensor_coalesced");
    requireUsable(inputs[i], "reduce_scatter_tensor_coalesced");
    requireSame(outputs[i], inputs[i], "reduce_scatter_tensor_coalesced");
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * getSize(), "loom: reduce_scatter_tensor_coalesced: input ",
                i, " holds ", inputs[i].numel(), " elements, not world size x ", outputs[i].numel());
    reductions.push_back(reductionFor(opts.reduceOp, outputs[i], "reduce_scatter_tensor_coalesced"));
  }
  const auto run = [this, inputs, outputs, reductions] {
    inGroup([&](FirstFailure& failed) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        failed(loomReduceScatter(inputs[i].data_ptr(), outputs[i].data_ptr(), count(outputs[i]), loomType(outputs[i]),
                                 reductions[i].op, comm_, nullptr));
      }
    });
  };
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor_coalesced", outputs, run, inputs, true);
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  requireOne(tensors, "send");
  const at::Tensor t = tensors[0];
  return enqueue(c10d::OpType::SEND, "send", tensors, [this, t, dstRank] {
    check(loomSend(t.data_ptr(), count(t), loomType(t), dstRank, comm_, nullptr));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  requireOne(tensors, "recv");
  const at::Tensor t = tensors[0];
  return enqueue(c10d::OpType::RECV, "recv", tensors, [this, t, srcRank] {
    check(loomRecv(t.data_ptr(), count(t), loomType(t), srcRank, comm_, nullptr));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  TORCH_CHECK(false, "loom: a receive from any source is not supported (name the source rank)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::barrier(const c10d::BarrierOptions& /*opts*/) {
  return enqueue(c10d::OpType::BARRIER, "barrier", {}, [this] { check(loomCommBarrier(comm_)); });
}

}  // namespace loom::torch
