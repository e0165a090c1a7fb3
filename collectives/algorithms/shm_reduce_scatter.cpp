// Shared-memory reduce-scatter among the ranks of one node. Each step takes
// the same piece of every block: a rank stages its pieces of the blocks that
// the others own, arrives, and reduces the pieces of its own block from every
// rank's slot (its own straight from its input), in rank order, straight into
// its output. One synchronization per step, and no result slot: each rank's
// output is private.
//
// When a block takes more than one step and every rank's buffers are
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells each rank where its peers' inputs are, and it
// reduces its block straight from them (readInPlace).
//
// The same walk serves the hierarchical reduce-scatter's node phase, where
// each rank owns several blocks (NodeBlocks): a step then takes the same
// piece of each.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

void readInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers, const NodeBlocks& blocks) {
  const size_t block = plan.c.blockBytes();
  const int me = node.localRank();
  const std::span<const void*> sources = node.sources();
  {
    const shm::PeerReads reading(node, plan.what);
    for (int k = 0; k < blocks.perRank; ++k) {
      for (int q = 0; q < node.localSize(); ++q) {
        sources[static_cast<size_t>(q)] = peers.send[static_cast<size_t>(q)] + blocks.inputAt(me, k);
      }
      cpu::reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv + blocks.outputAt(me, k),
                  elementsIn(block, plan.c.typeSize));
    }
  }
  node.sync(plan.what);  // no rank reuses its input while another still reads it
}

}  // namespace

void shmReduceBlocks(const Plan& plan, const NodeBlocks& blocks) {
  shm::NodeArea& node = startOnNode(plan);
  const int n = node.localSize();
  const int me = node.localRank();
  const size_t typeSize = plan.c.typeSize;
  const size_t block = plan.c.blockBytes();
  const size_t perRank = static_cast<size_t>(blocks.perRank);
  // A slot holds one piece of each of the n x perRank blocks.
  const size_t stepBytes =
      std::max(typeSize, wholeElements(node.slotBytes() / (static_cast<size_t>(n) * perRank), typeSize));
  const Pieces pieces(block, stepBytes);
  const std::span<const void*> sources = node.sources();
  if (pieces.count() > 1) {
    size_t outputBytes = 0;  // as far as this rank's blocks reach
    for (int k = 0; k < blocks.perRank; ++k) outputBytes = std::max(outputBytes, blocks.outputAt(me, k) + block);
    node.offerBuffers(blocks.input, blocks.inputBytes, plan.c.recv, outputBytes);
  }

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const uint64_t step = node.nextStep();
    // Where rank q stages its piece of local rank j's k-th block.
    const auto staged = [&](int q, int j, int k) {
      return node.stage(q, step) + (static_cast<size_t>(j) * perRank + static_cast<size_t>(k)) * stepBytes;
    };
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      for (int k = 0; k < blocks.perRank; ++k) {
        plan.copy(staged(me, j, k), blocks.input + blocks.inputAt(j, k) + piece.offset, piece.bytes);
      }
    }
    node.arrive(step, plan.what);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0) {
      readInPlace(plan, node, *peers, blocks);
      return;
    }
    if (piece.bytes == 0) continue;

    for (int k = 0; k < blocks.perRank; ++k) {
      for (int q = 0; q < n; ++q) {
        sources[static_cast<size_t>(q)] =
            q == me ? blocks.input + blocks.inputAt(me, k) + piece.offset : staged(q, me, k);
      }
      cpu::reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv + blocks.outputAt(me, k) + piece.offset,
                  elementsIn(piece.bytes, typeSize));
    }
  }
}

void shmReduceScatter(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  const auto ownBlock = [block](int q, int) { return static_cast<size_t>(q) * block; };
  shmReduceBlocks(plan, {.input = plan.c.send,
                         .inputBytes = block * static_cast<size_t>(plan.node->localSize()),
                         .perRank = 1,
                         .inputAt = ownBlock,
                         .outputAt = [](int, int) { return size_t{0}; }});
}

// Per slot-sized piece: one arrival; the blocks the others use staged once.
extern const AlgorithmEntry kShmReduceScatter{
    .name = "shm",
    .kind = CollectiveKind::ReduceScatter,
    .run = shmReduceScatter,
    .costUs = [](const CostModel& m, size_t bytes) {
      [[maybe_unused]] const double s = static_cast<double>(bytes);
      return m.onSharedNode(1, (m.n() - 1) / m.n() * s);
    },
    .needs = Needs::NodeSegment,
    .foldsInRankOrder = true};

}  // namespace loom::coll
