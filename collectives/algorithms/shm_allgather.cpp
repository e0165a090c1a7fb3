// Shared-memory all-gather among the ranks of one node: per step every rank
// stages a piece of its block, arrives, and copies the same piece of every
// other rank's block out of their slots (its own straight from its input).
// One synchronization per step.
//
// When a block takes more than one step and every rank's buffers are
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells each rank where its peers' inputs are, and it
// copies their blocks straight from there (readInPlace).
//
// The same walk serves the hierarchical all-gather's node phase, where each
// rank contributes several blocks that already lie in its output
// (NodeBlocks): a step then stages the same piece of each.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

void readInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers, const NodeBlocks& blocks) {
  const size_t block = plan.c.blockBytes();
  {
    const shm::PeerReads reading(node, plan.what);
    for (int q = 0; q < node.localSize(); ++q) {
      for (int k = 0; k < blocks.perRank; ++k) {
        plan.copy(plan.c.recv + blocks.outputAt(q, k), peers.send[static_cast<size_t>(q)] + blocks.inputAt(q, k),
                  block);
      }
    }
  }
  node.sync(plan.what);  // no rank reuses its input while another still reads it
}

}  // namespace

void shmGatherBlocks(const Plan& plan, const NodeBlocks& blocks) {
  shm::NodeArea& node = startOnNode(plan);
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t block = plan.c.blockBytes();
  const size_t perRank = static_cast<size_t>(blocks.perRank);
  const Pieces pieces(block, std::max(plan.c.typeSize, wholeElements(node.slotBytes() / perRank, plan.c.typeSize)));
  if (pieces.count() > 1) {
    size_t outputBytes = 0;  // as far as the blocks reach
    for (int q = 0; q < n; ++q) {
      for (int k = 0; k < blocks.perRank; ++k) outputBytes = std::max(outputBytes, blocks.outputAt(q, k) + block);
    }
    node.offerBuffers(blocks.input, blocks.inputBytes, plan.c.recv, outputBytes);
  }

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const uint64_t step = node.nextStep();
    // This rank's piece of its k-th block, and where the step stages it.
    const auto in = [&](int k) { return blocks.input + blocks.inputAt(me, k) + piece.offset; };
    const auto staged = [&](int q, int k) {
      return node.stage(q, step, perRank * piece.bytes) + static_cast<size_t>(k) * piece.bytes;
    };
    for (int k = 0; k < blocks.perRank; ++k) plan.copy(staged(me, k), in(k), piece.bytes);
    node.arrive(step, plan.what);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0) {
      readInPlace(plan, node, *peers, blocks);
      return;
    }

    for (int q = 0; q < n; ++q) {
      for (int k = 0; k < blocks.perRank; ++k) {
        std::byte* out = plan.c.recv + blocks.outputAt(q, k) + piece.offset;
        plan.copy(out, q == me ? in(k) : staged(q, k), piece.bytes);
      }
    }
  }
}

void shmAllGather(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  shmGatherBlocks(plan, {.input = plan.c.send,
                         .inputBytes = block,
                         .perRank = 1,
                         .inputAt = [](int, int) { return size_t{0}; },
                         .outputAt = [block](int q, int) { return static_cast<size_t>(q) * block; }});
}

// Per slot-sized piece: one arrival; the blocks the others use staged once.
extern const AlgorithmEntry kShmAllGather{
    .name = "shm",
    .kind = CollectiveKind::AllGather,
    .run = shmAllGather,
    .costUs = [](const CostModel& m, size_t bytes) {
      [[maybe_unused]] const double s = static_cast<double>(bytes);
      return m.onSharedNode(1, (m.n() - 1) / m.n() * s);
    },
    .needs = Needs::NodeSegment,
    .foldsInRankOrder = true};

}  // namespace loom::coll
