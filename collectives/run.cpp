#include "collectives/run.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "base/coarse_clock.hpp"
#include "base/copy_bytes.hpp"
#include "base/datatype.hpp"
#include "base/device/cuda.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/call_signature.hpp"
#include "collectives/comm_state.hpp"
#include "collectives/cpu/host_executor.hpp"
#include "collectives/device_staging.hpp"
#include "collectives/device_work.hpp"
#include "collectives/signature_check.hpp"

namespace loom::coll {
namespace {

// Bytes of this rank's input that enter a reduction.
size_t contributionBytes(const Collective& c, int nranks) {
  return c.kind == CollectiveKind::ReduceScatter ? c.blockBytes() * static_cast<size_t>(nranks) : c.blockBytes();
}


}  // namespace

const char* collectiveName(CollectiveKind kind) {
  static constexpr const char* kNames[kCollectiveKinds] = {"broadcast",  "reduce",   "allreduce", "reducescatter",
                                                           "allgather", "alltoall", "gather",    "scatter"};
  return kNames[static_cast<int>(kind)];
}

namespace {

// How long rank 0's survey after a failure waits for answers: a stopped rank never answers.
constexpr std::chrono::milliseconds kSurveyWithin{1000};

// The bytes the tuner chooses by: all-gather's whole output, else what enters the collective per rank.
size_t tunedBytes(const Collective& c, int nranks) {
  return c.kind == CollectiveKind::AllGather ? c.blockBytes() * static_cast<size_t>(nranks)
                                             : contributionBytes(c, nranks);
}

// `callBytes`: the user's count x datatype size, whatever part of it `c` is
// (a piece, device_staging.hpp), as every rank's stall probe compares it.
void runChosen(Communicator& comm, CommState& state, const Collective& c, uint32_t sequence, uint32_t call,
               FlightRecorder::Entry& entry, const Executor& executor, const Choice& choice, uint64_t callBytes);

// One collective, under the state's runLock; `entry` learns its algorithm.
// A call on device memory is chosen for as the host executor would run it,
// as every rank of the call chooses whatever memory its buffers are in; then
// its buffers are staged through pinned host memory, unless the algorithm
// takes device buffers as they are (AlgorithmEntry::readsDevice); a large
// element-wise call of a job with GPUs stages in pieces, on every rank
// (device_staging.hpp).
void runLocked(Communicator& comm, CommState& state, const Collective& c, uint32_t sequence, uint32_t call,
               FlightRecorder::Entry& entry) {
  const bool onDevice = touchesDevice(c);
  const Executor& executor = onDevice ? hostExecutor() : executorFor(c);
  const Choice choice = comm.size() > 1 ? state.tuner.choose(c.kind, tunedBytes(c, comm.size()), executor) : Choice{};
  const bool readsDevice = choice.algorithm != nullptr && choice.algorithm->readsDevice;
  if (!readsDevice && comm.size() > 1 && state.jobHasDevices) {
    if (const size_t piece = pieceBytesFor(c, state.stagingPieceBytes, comm.size()); piece != 0) {
      runInPieces(comm, c, piece, [&](const Collective& p) {
        runChosen(comm, state, p, sequence, call, entry, executor, choice, c.blockBytes());
      });
      return;
    }
  }
  if (onDevice && !readsDevice) {
    runStaged(comm, c, [&](const Collective& staged) {
      runChosen(comm, state, staged, sequence, call, entry, executor, choice, c.blockBytes());
    });
    return;
  }
  runChosen(comm, state, c, sequence, call, entry, executor, choice, c.blockBytes());
}

// PreMulSum's call as the algorithm runs it: this rank's input scaled once,
// into scratch (by its device, for device memory the algorithm reads in
// place), then summed.
Collective scaledForSum(Communicator& comm, CommState& state, const Collective& given, const Executor& executor) {
  Collective c = given;
  const size_t bytes = contributionBytes(c, comm.size());
  const void* source = c.send;
  if (c.sendKind == memory::MemoryKind::CudaDevice) {
    std::byte* scaled = state.scaledOnDevice.get(bytes);
    DeviceWork device(comm);
    device.waitForInputs();
    device.scale(c.type, source, scaled, bytes / c.typeSize, c.reduction.scalar);
    device.finish();  // peers read the scaled input once this rank arrives
    c.send = scaled;
  } else {
    auto scaled = state.scaledInput.get(bytes);
    executor.reduce(c.type, cpu::ReduceOp::PreMulSum, std::span(&source, 1), scaled.data(), bytes / c.typeSize,
                    c.reduction.scalar);
    c.send = scaled.data();
  }
  c.reduction.op = cpu::ReduceOp::Sum;
  return c;
}

void runChosen(Communicator& comm, CommState& state, const Collective& c, uint32_t sequence, uint32_t call,
               FlightRecorder::Entry& entry, const Executor& executor, const Choice& choice, uint64_t callBytes) {
  const int n = comm.size();
  const bool reduces = c.kind == CollectiveKind::AllReduce || c.kind == CollectiveKind::Reduce ||
                       c.kind == CollectiveKind::ReduceScatter;
  if (reduces && c.reduction.op == cpu::ReduceOp::PreMulSum) {
    runChosen(comm, state, scaledForSum(comm, state, c, executor), sequence, call, entry, executor, choice, callBytes);
    return;
  }
  // Averages divide the result at the end (the device, for device memory
  // the algorithm reads in place).
  const bool average = reduces && c.reduction.average;

  const bool hasResult = c.kind != CollectiveKind::Reduce || comm.rank() == c.root;
  if (n == 1) {
    entry.algorithm = "alone";
    executor.copy(c.recv, c.send, c.blockBytes());  // with one rank, every collective is a copy of its own block
  } else {
    const std::string& what = state.callName.name(c.kind, sequence);
    const AlgorithmEntry& algorithm = *choice.algorithm;
    shm::NodeArea* node = nullptr;
    // Forced onto nodes of unequal size, hier runs the flat ring (algorithms/hierarchical_*.cpp).
    const bool perNode = algorithm.needs == Needs::UniformNodes && state.acrossHosts;
    const bool flatInstead = algorithm.needs == Needs::UniformNodes && !perNode;
    entry.algorithm = flatInstead ? "ring" : algorithm.name;
    if (algorithm.needs == Needs::NodeSegment || perNode) {
      try {
        node = &state.nodeArea(perNode ? state.tuner.segmentSlotBytes() : choice.chunkBytes);
      } catch (const Error& e) {
        throw Error(e.code(), what + ": mapping the node's shared segment: " + e.what());
      }
    }
    Plan plan{.comm = comm,
              .executor = executor,
              .c = c,
              .rank = comm.rank(),
              .nranks = n,
              .sequence = sequence,
              .call = call,
              .callBytes = callBytes,
              .chunkBytes = std::min(choice.chunkBytes, comm.engine().context().fifo.totalBytes() / 2),
              .what = what,
              .node = node,
              .ring = &state.ring,
              .trees = &state.trees,
              .acrossHosts = state.acrossHosts ? &*state.acrossHosts : nullptr,
              .received = &state.received,
              .channel = &state.channel};
    LOOM_TRACE(Coll, "%s: %zu elements of type %d, %s", plan.what.c_str(), c.count, static_cast<int>(c.type),
               algorithm.name);
    try {
      algorithm.run(plan);
    } catch (const Error&) {
      if (node != nullptr) node->abandonCall();  // peers may be reading this rank's buffers
      throw;
    }
  }
  if (average && hasResult && c.count != 0) {
    const void* result = c.recv;
    if (c.recvKind == memory::MemoryKind::CudaDevice) {
      DeviceWork device(comm);
      device.average(c.type, c.recv, c.count, n);
      device.finish();
    } else if (isFloatType(c.type)) {
      executor.reduce(c.type, cpu::ReduceOp::PreMulSum, std::span(&result, 1), c.recv, c.count, 1.0 / n);
    } else {
      executor.divide(c.type, c.recv, c.count, static_cast<uint64_t>(n));
    }
  }
}

}  // namespace

void runCollective(Communicator& comm, const Collective& c) {
  CommState& state = CommState::of(comm);
  std::lock_guard lock(state.runLock);
  const uint32_t sequence = ++state.sequence;
  const auto began = coarseNow();  // one reading for both records
  FlightRecorder::Entry& entry = state.recorder.start(sequence, c, began);
  const uint32_t call = callSignature(c);  // the call as made, before PreMulSum and Avg are resolved
  comm.progress.begin(collectiveName(c.kind), sequence, call, c.blockBytes(), began);
  try {
    if (state.checkSignatures) checkSignatures(comm, c, sequence);
    try {
      runLocked(comm, state, c, sequence, call, entry);
    } catch (const Error& e) {
      // Ranks out of step, found in the data path: the connections now hold
      // another call's data. Nobody may wait out a deadline for it.
      if (e.code() == loomInvalidUsage && !comm.cancelled()) comm.poison(e.what());
      // A lost peer, or a deadline that a lost link elsewhere may explain:
      // the rank that knows why is about to say.
      if (e.code() == loomRemoteError || e.code() == loomTimeout) comm.awaitRootCause(state.callName.last());
      throw;
    }
  } catch (const Error& e) {
    const auto failed = coarseNow();
    comm.progress.end(Progress::Outcome::Failed, failed);
    state.recorder.fail(entry, e.what(), failed);
    // After a timeout or a lost peer, rank 0 also says where every rank is:
    // who stopped where, who is gone.
    const bool stuck = e.code() == loomTimeout || e.code() == loomRemoteError;
    const auto survey = comm.rank() == 0 && stuck ? comm.survey(kSurveyWithin) : std::vector<std::string>{};
    reportFlight(state.recorder, comm.rank(), survey);
    throw;
  }
  const auto ended = coarseNow();
  comm.progress.end(Progress::Outcome::Done, ended);
  state.recorder.finish(entry, ended);
}

}  // namespace loom::coll
