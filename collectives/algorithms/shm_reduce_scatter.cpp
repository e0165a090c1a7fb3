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
// reduces its block straight from them (readInPlace). Device buffers are read
// so too, by the device's kernel, when every rank's are on one GPU (CUDA IPC,
// or threads); a rank with device buffers stages nothing at the first step,
// and if they are not all read in place every rank starts over, device
// buffers staged through pinned host memory (shm_allreduce.cpp says more).
//
// The same walk serves the hierarchical reduce-scatter's node phase, where
// each rank owns several blocks (NodeBlocks): a step then takes the same
// piece of each.

#include <optional>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

// After the first step's arrive: every rank's input is readable here, by the
// CPU or by this rank's device, whichever `work` is.
void readInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers, const NodeBlocks& blocks,
                 LocalWork& work) {
  const size_t block = plan.c.blockBytes();
  const int me = node.localRank();
  const std::span<const void*> sources = node.sources();
  {
    const shm::PeerReads reading(node, plan.what);
    for (int k = 0; k < blocks.perRank; ++k) {
      for (int q = 0; q < node.localSize(); ++q) {
        sources[static_cast<size_t>(q)] = peers.send[static_cast<size_t>(q)] + blocks.inputAt(me, k);
      }
      std::byte* out = plan.c.recv + blocks.outputAt(me, k);
      work.reduce(plan.c.type, plan.c.reduction.op, sources, out, elementsIn(block, plan.c.typeSize));
    }
    work.finish();
  }
  node.sync(plan.what);  // no rank reuses its input while another still reads it
}

// The n x perRank pieces a step stages, one of each block.
size_t waysOf(const shm::NodeArea& node, const NodeBlocks& blocks) {
  return static_cast<size_t>(node.localSize()) * static_cast<size_t>(blocks.perRank);
}

// A slot holds one piece of each of the n x perRank blocks.
size_t stepBytesOf(const Plan& plan, const shm::NodeArea& node, const NodeBlocks& blocks) {
  return std::max(plan.c.typeSize, wholeElements(node.slotBytes() / waysOf(node, blocks), plan.c.typeSize));
}

// How far apart a step's pieces lie where they are staged: a whole small
// call's pieces side by side, where they all fit the rank's arrival line (as
// a small all-reduce's input does: no slot's lines to fetch besides the
// counter's), else a slot's share each.
size_t strideOf(const Plan& plan, const shm::NodeArea& node, const NodeBlocks& blocks) {
  const size_t block = std::max(plan.c.typeSize, plan.c.blockBytes());
  const size_t stepBytes = stepBytesOf(plan, node, blocks);
  return block <= stepBytes && waysOf(node, blocks) * block <= shm::kArrivalBytes ? block : stepBytes;
}

// Where local rank q stages its piece of local rank j's k-th block at `step`.
std::byte* staged(shm::NodeArea& node, const NodeBlocks& blocks, size_t stride, uint64_t step, int q, int j, int k) {
  const size_t at = static_cast<size_t>(j) * static_cast<size_t>(blocks.perRank) + static_cast<size_t>(k);
  return node.stage(q, step, waysOf(node, blocks) * stride) + at * stride;
}

// This rank's pieces of the blocks the others own, staged for `step`.
void stageOthers(const Plan& plan, shm::NodeArea& node, const NodeBlocks& blocks, size_t stride, uint64_t step,
                 const Piece& piece) {
  const int me = node.localRank();
  for (int j = 0; j < node.localSize(); ++j) {
    if (j == me) continue;
    for (int k = 0; k < blocks.perRank; ++k) {
      plan.copy(staged(node, blocks, stride, step, me, j, k), blocks.input + blocks.inputAt(j, k) + piece.offset,
                piece.bytes);
    }
  }
}

// Step by step through the segment; `firstStep`: the step at which the first
// piece is already staged and arrived, if it is.
void reducePieces(const Plan& plan, shm::NodeArea& node, const NodeBlocks& blocks, std::optional<uint64_t> firstStep) {
  const int n = node.localSize();
  const int me = node.localRank();
  const Pieces pieces(plan.c.blockBytes(), stepBytesOf(plan, node, blocks));
  const size_t stride = strideOf(plan, node, blocks);
  const std::span<const void*> sources = node.sources();
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const bool arrived = i == 0 && firstStep;
    const uint64_t step = arrived ? *firstStep : node.nextStep();
    if (!arrived) {
      stageOthers(plan, node, blocks, stride, step, piece);
      node.arrive(step, plan.what);
    }
    if (piece.bytes == 0) continue;
    for (int k = 0; k < blocks.perRank; ++k) {
      for (int q = 0; q < n; ++q) {
        sources[static_cast<size_t>(q)] = q == me ? blocks.input + blocks.inputAt(me, k) + piece.offset
                                                  : staged(node, blocks, stride, step, q, me, k);
      }
      cpu::reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv + blocks.outputAt(me, k) + piece.offset,
                  elementsIn(piece.bytes, plan.c.typeSize));
    }
  }
}

// How far this rank's blocks reach in its output.
size_t outputBytes(const shm::NodeArea& node, const NodeBlocks& blocks, size_t block) {
  size_t bytes = 0;
  for (int k = 0; k < blocks.perRank; ++k) bytes = std::max(bytes, blocks.outputAt(node.localRank(), k) + block);
  return bytes;
}

NodeBlocks reduceScatterBlocks(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  return {.input = plan.c.send,
          .inputBytes = block * static_cast<size_t>(plan.node->localSize()),
          .perRank = 1,
          .block = block,
          .inputByRank = true,
          .outputByRank = false,
          .hostRanks = nullptr};
}

}  // namespace

void shmReduceBlocks(const Plan& plan, const NodeBlocks& blocks) {
  shm::NodeArea& node = startOnNode(plan);
  const size_t stepBytes = stepBytesOf(plan, node, blocks);
  const Pieces pieces(plan.c.blockBytes(), stepBytes);
  if (pieces.count() == 1) {
    reducePieces(plan, node, blocks, std::nullopt);
    return;
  }
  node.offerBuffers(blocks.input, blocks.inputBytes, plan.c.recv, outputBytes(node, blocks, plan.c.blockBytes()));
  const uint64_t first = node.nextStep();
  stageOthers(plan, node, blocks, strideOf(plan, node, blocks), first, pieces[0]);
  node.arrive(first, plan.what);
  if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr) {
    HostWork work(plan.executor);
    readInPlace(plan, node, *peers, blocks, work);
    return;
  }
  // Where a rank with device buffers staged nothing, every rank starts over.
  reducePieces(plan, node, blocks, node.deviceOffered() ? std::nullopt : std::optional(first));
}

void shmReduceScatter(const Plan& plan) {
  if (!touchesDevice(plan.c)) {
    shmReduceBlocks(plan, reduceScatterBlocks(plan));
    return;
  }
  shm::NodeArea& node = startOnNode(plan);
  const NodeBlocks blocks = reduceScatterBlocks(plan);
  if (Pieces(plan.c.blockBytes(), stepBytesOf(plan, node, blocks)).count() > 1 &&
      readDeviceInPlace(plan, node, blocks.input, blocks.inputBytes, plan.c.recv,
                        outputBytes(node, blocks, plan.c.blockBytes()),
                        [&](const shm::PeerBuffers& peers, LocalWork& work) {
                          readInPlace(plan, node, peers, blocks, work);
                        })) {
    return;
  }
  onHostBuffers(plan, [&](const Plan& p) { reducePieces(p, node, reduceScatterBlocks(p), std::nullopt); });
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
    .foldsInRankOrder = true,
    .readsDevice = true};

}  // namespace loom::coll
