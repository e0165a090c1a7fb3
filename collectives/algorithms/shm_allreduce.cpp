// Shared-memory all-reduce among the ranks of one node. The buffer goes
// through the node's segment one step (a slot's worth) at a time.
//
// Small messages (latency-bound): every rank copies its piece into its staging
// slot, arrives (one synchronization), and reduces all the slots straight
// into its output.
//
// Larger ones are cut into n slices per piece, one per rank, pipelined so
// that each step costs one synchronization:
//   1. a rank stages only the slices that the others reduce;
//   2. it arrives: every rank has staged this piece, and has put its slice
//      of the previous piece in the result slot;
//   3. it copies the others' slices of the previous piece out of the result slot;
//   4. it reduces its own slice of this piece from its input and the others'
//      slots straight into its output, and copies it to the result slot.
// A last synchronization releases the last piece's slices. Each rank moves
// (n-1)/n of the buffer in and out, and writes only its own slice twice,
// where staging everything and reducing it whole would move all of it.
//
// When the message takes more than one step and every rank's buffers are
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive also tells each rank where its peers' buffers are
// (shm::NodeArea::offerBuffers), and no more is staged: each rank
// reduces its 1/n slice straight from every rank's input into its own output,
// then copies the other slices from their owners' outputs (readInPlace).
//
// Device buffers (CUDA) take the same two shots when every rank's are on
// one GPU and reachable here (CUDA IPC, or threads of one process): the
// device's kernel reduces this rank's slice from every rank's input, and
// copies fetch the other slices, each rank waiting for its device before it
// tells its peers (the two-shot all-reduce of vLLM's and TensorRT-LLM's
// custom all-reduce, with the flags on the host's segment). A rank with
// device buffers stages nothing at the first step, where the ranks learn
// this; if they are not all read in place, every rank starts over on the
// staged path, device buffers copied through pinned host memory.
//
// Either way the sources are combined in rank order in one pass, so every
// rank gets the same bits whatever the path, the step size or the message
// size (the LOOM_DETERMINISTIC order; the device's kernels have the host's bits).
#include <optional>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {
namespace {

// Up to this many bytes one synchronization beats moving less memory.
constexpr size_t kLatencyBound = 16 << 10;
constexpr size_t kL1Block = 8 << 10;

// After the first step's arrive: every rank's input and output are readable
// here, by the CPU or by this rank's device, whichever `work` is.
void readInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers, LocalWork& work) {
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t bytes = plan.c.blockBytes();
  const std::span<const void*> sources = node.sources();

  // Reduce-scatter: this rank's slice, from every rank's input, into its output.
  const Slice mine = sliceOf(bytes, plan.c.typeSize, n, me);
  for (int q = 0; q < n; ++q) sources[static_cast<size_t>(q)] = peers.send[static_cast<size_t>(q)] + mine.offset;
  if (mine.bytes != 0) {
    const shm::PeerReads reading(node, plan.what);
    work.reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv + mine.offset,
                elementsIn(mine.bytes, plan.c.typeSize));
    work.finish();  // before the peers hear that the slice is there
  }
  node.sync(plan.what);  // every slice is final, and every input has been read

  // All-gather: the other slices, from their owners' outputs.
  {
    const shm::PeerReads reading(node, plan.what);
    for (int q = 0; q < n; ++q) {
      if (q == me) continue;
      const Slice theirs = sliceOf(bytes, plan.c.typeSize, n, q);
      work.copy(plan.c.recv + theirs.offset, peers.recv[static_cast<size_t>(q)] + theirs.offset, theirs.bytes);
    }
    work.finish();
  }
  // No rank may return, and reuse its buffers, while another still reads it.
  node.sync(plan.what);
}

// One synchronization per piece: all of it staged, all of it reduced.
void reduceWhole(const Plan& plan, shm::NodeArea& node, const Pieces& pieces) {
  const int n = node.localSize();
  const int me = node.localRank();
  const std::span<const void*> sources = node.sources();
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const std::byte* in = plan.c.send + piece.offset;
    const uint64_t step = node.nextStep();
    plan.copy(node.stage(me, step, piece.bytes), in, piece.bytes);
    node.arrive(step, plan.what);
    for (int q = 0; q < n; ++q) sources[static_cast<size_t>(q)] = q == me ? in : node.stage(q, step, piece.bytes);
    if (piece.bytes != 0) {
      cpu::reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv + piece.offset,
                  elementsIn(piece.bytes, plan.c.typeSize));
    }
  }
}

struct Reduced {
  Piece piece;
  uint64_t step;  // whose result slot holds the piece's slices
};

// The slices of a piece that the other ranks reduced, out of the result slot.
void copyOthersSlices(const Plan& plan, shm::NodeArea& node, const Reduced& reduced) {
  for (int q = 0; q < node.localSize(); ++q) {
    if (q == node.localRank()) continue;
    const Slice theirs = sliceOf(reduced.piece.bytes, plan.c.typeSize, node.localSize(), q);
    plan.copy(plan.c.recv + reduced.piece.offset + theirs.offset, node.result(reduced.step) + theirs.offset,
              theirs.bytes);
  }
}

// The others' slices of `piece` into this rank's staging slot for `step`.
void stageOthersSlices(const Plan& plan, shm::NodeArea& node, uint64_t step, const Piece& piece) {
  for (int q = 0; q < node.localSize(); ++q) {
    if (q == node.localRank()) continue;
    const Slice theirs = sliceOf(piece.bytes, plan.c.typeSize, node.localSize(), q);
    plan.copy(node.stage(node.localRank(), step) + theirs.offset, plan.c.send + piece.offset + theirs.offset,
              theirs.bytes);
  }
}

// Slice by slice through the segment; `firstStep`: the step at which the
// first piece is already staged and arrived, if it is.
void pipelined(const Plan& plan, shm::NodeArea& node, const Pieces& pieces, std::optional<uint64_t> firstStep) {
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t typeSize = plan.c.typeSize;
  const std::span<const void*> sources = node.sources();
  std::optional<Reduced> previous;
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const std::byte* in = plan.c.send + piece.offset;
    std::byte* out = plan.c.recv + piece.offset;
    uint64_t step = 0;
    if (i == 0 && firstStep) {
      step = *firstStep;
    } else {
      step = node.nextStep();
      stageOthersSlices(plan, node, step, piece);
      node.arrive(step, plan.what);
    }
    if (previous) copyOthersSlices(plan, node, *previous);

    const Slice mine = sliceOf(piece.bytes, typeSize, n, me);
    // In blocks that stay in L1, so that the copy to the result slot reads what was just written.
    const size_t block = wholeElements(kL1Block, typeSize);
    for (size_t done = 0; done < mine.bytes; done += block) {
      const size_t at = mine.offset + done;
      const size_t bytes = std::min(block, mine.bytes - done);
      for (int q = 0; q < n; ++q) {
        sources[static_cast<size_t>(q)] = (q == me ? in : node.stage(q, step)) + at;
      }
      cpu::reduce(plan.c.type, plan.c.reduction.op, sources, out + at, elementsIn(bytes, typeSize));
      plan.copy(node.result(step) + at, out + at, bytes);
    }
    previous = Reduced{piece, step};
  }
  node.sync(plan.what);  // every rank's slice of the last piece is in the result slot
  copyOthersSlices(plan, node, *previous);
}

}  // namespace

void shmAllReduce(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const Pieces pieces(plan.c.blockBytes(), wholeElements(node.slotBytes(), plan.c.typeSize));
  if (plan.c.blockBytes() <= kLatencyBound) {
    onHostBuffers(plan, [&](const Plan& p) { reduceWhole(p, node, pieces); });
    return;
  }
  if (pieces.count() == 1) {
    onHostBuffers(plan, [&](const Plan& p) { pipelined(p, node, pieces, std::nullopt); });
    return;
  }
  // The first step tells every rank where its peers' buffers are (a rank
  // whose buffers are on its device stages nothing there).
  if (touchesDevice(plan.c)) {
    const bool read = readDeviceInPlace(
        plan, node, plan.c.send, plan.c.blockBytes(), plan.c.recv, plan.c.blockBytes(),
        [&](const shm::PeerBuffers& peers, LocalWork& work) { readInPlace(plan, node, peers, work); });
    if (!read) onHostBuffers(plan, [&](const Plan& p) { pipelined(p, node, pieces, std::nullopt); });
    return;
  }
  node.offerBuffers(plan.c.send, plan.c.blockBytes(), plan.c.recv, plan.c.blockBytes());
  const uint64_t first = node.nextStep();
  stageOthersSlices(plan, node, first, pieces[0]);
  node.arrive(first, plan.what);
  if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr) {
    HostWork work(plan.executor);
    readInPlace(plan, node, *peers, work);
    return;
  }
  // Where a rank with device buffers staged nothing, every rank starts over.
  pipelined(plan, node, pieces, node.deviceOffered() ? std::nullopt : std::optional(first));
}

// Per slot-sized piece: arrive, then the result slice; the buffer staged once.
extern const AlgorithmEntry kShmAllReduce{
    .name = "shm",
    .kind = CollectiveKind::AllReduce,
    .run = shmAllReduce,
    .costUs = [](const CostModel& m, size_t bytes) {
      [[maybe_unused]] const double s = static_cast<double>(bytes);
      return m.onSharedNode(2, s);
    },
    .needs = Needs::NodeSegment,
    .foldsInRankOrder = true,
    .readsDevice = true};

}  // namespace loom::coll
