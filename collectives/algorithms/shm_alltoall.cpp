// Shared-memory all-to-all among the ranks of one node: per step every rank
// stages a piece of each block it sends (block q for rank q, a slot's 1/n
// each) in its slot, arrives, and copies the piece meant for it out of every
// other rank's slot; its own block goes straight from its input. One
// synchronization per step, where the direct algorithm posts n - 1 messages
// through the point-to-point FIFOs, each a hand-off of its own.
//
// When a block takes more than one step and every rank's buffers are
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells each rank where its peers' inputs are, and
// it copies its block of each straight from there (readBlocksInPlace): one copy
// instead of two. Device buffers (CUDA) on one GPU, every rank's, are copied
// so too, by each rank's device; a rank with device buffers stages nothing
// at the first step, and if they are not all read in place every rank starts
// over on the staged path (shm_allreduce.cpp says more).

#include <optional>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

// After the first step's arrive: this rank's block of every rank's input,
// copied by the CPU or by this rank's device, whichever `work` is.
void readBlocksInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers, LocalWork& work) {
  const size_t block = plan.c.blockBytes();
  const size_t mine = static_cast<size_t>(node.localRank()) * block;
  {
    const shm::PeerReads reading(node, plan.what);
    for (int q = 0; q < node.localSize(); ++q) {
      work.copy(plan.c.recv + static_cast<size_t>(q) * block, peers.send[static_cast<size_t>(q)] + mine, block);
    }
    work.finish();
  }
  node.sync(plan.what);  // no rank reuses its input while another still reads it
}

// Where local rank `from` stages its piece for local rank `to` at `step`.
std::byte* stagedFor(shm::NodeArea& node, uint64_t step, const Piece& piece, int from, int to) {
  return node.stage(from, step, static_cast<size_t>(node.localSize()) * piece.bytes) +
         static_cast<size_t>(to) * piece.bytes;
}

// This rank's piece of each block the others receive, staged for `step`.
void stageForPeers(const Plan& plan, shm::NodeArea& node, uint64_t step, const Piece& piece) {
  const int me = node.localRank();
  for (int q = 0; q < node.localSize(); ++q) {
    if (q == me) continue;
    const std::byte* in = plan.c.send + static_cast<size_t>(q) * plan.c.blockBytes() + piece.offset;
    plan.copy(stagedFor(node, step, piece, me, q), in, piece.bytes);
  }
}

// Step by step through the segment; `firstStep`: the step at which the first
// piece is already staged and arrived, if it is.
void exchangePieces(const Plan& plan, shm::NodeArea& node, const Pieces& pieces, std::optional<uint64_t> firstStep) {
  const int me = node.localRank();
  const size_t block = plan.c.blockBytes();
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const bool arrived = i == 0 && firstStep;
    const uint64_t step = arrived ? *firstStep : node.nextStep();
    // Its own block's piece goes straight from its input to its output,
    // while its peers may still stage theirs.
    const size_t own = static_cast<size_t>(me) * block + piece.offset;
    if (!arrived) {
      stageForPeers(plan, node, step, piece);
      node.publish(step);
      plan.copy(plan.c.recv + own, plan.c.send + own, piece.bytes);
      node.awaitArrivals(step, plan.what);
    } else {
      plan.copy(plan.c.recv + own, plan.c.send + own, piece.bytes);
    }
    for (int q = 0; q < node.localSize(); ++q) {
      if (q == me) continue;
      plan.copy(plan.c.recv + static_cast<size_t>(q) * block + piece.offset, stagedFor(node, step, piece, q, me),
                piece.bytes);
    }
  }
}

}  // namespace

void shmAlltoAll(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const Pieces pieces = piecesPerBlock(plan, node);
  const size_t all = plan.c.blockBytes() * static_cast<size_t>(node.localSize());
  if (!touchesDevice(plan.c)) {
    if (pieces.count() == 1) {
      exchangePieces(plan, node, pieces, std::nullopt);
      return;
    }
    node.offerBuffers(plan.c.send, all, plan.c.recv, all);
    const uint64_t first = node.nextStep();
    stageForPeers(plan, node, first, pieces[0]);
    node.arrive(first, plan.what);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr) {
      HostWork work(plan.executor);
      readBlocksInPlace(plan, node, *peers, work);
      return;
    }
    // Where a rank with device buffers staged nothing, every rank starts over.
    exchangePieces(plan, node, pieces, node.deviceOffered() ? std::nullopt : std::optional(first));
    return;
  }
  if (pieces.count() > 1 && readDeviceInPlace(plan, node, plan.c.send, all, plan.c.recv, all,
                                               [&](const shm::PeerBuffers& peers, LocalWork& work) {
                                                 readBlocksInPlace(plan, node, peers, work);
                                               })) {
    return;
  }
  onHostBuffers(plan, [&](const Plan& p) { exchangePieces(p, node, pieces, std::nullopt); });
}

// Per slot-sized piece: one arrival; the blocks the others receive staged once.
extern const AlgorithmEntry kShmAlltoAll{
    .name = "shm",
    .kind = CollectiveKind::AlltoAll,
    .run = shmAlltoAll,
    .costUs = [](const CostModel& m, size_t bytes) {
      [[maybe_unused]] const double s = static_cast<double>(bytes);
      return m.onSharedNode(1, (m.n() - 1) / m.n() * s);
    },
    .needs = Needs::NodeSegment,
    .foldsInRankOrder = true,
    .readsDevice = true};

}  // namespace loom::coll
