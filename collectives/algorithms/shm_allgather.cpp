// Shared-memory all-gather among the ranks of one node: per step every rank
// stages a piece of its block, arrives, and copies the same piece of every
// other rank's block out of their slots (its own straight from its input).
// One synchronization per step.
//
// When a block takes more than one step and every rank's buffers are
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells each rank where its peers' inputs are, and it
// copies their blocks straight from there (readInPlace). Device buffers are
// read so too, by the device's copies, when every rank's are on one GPU (CUDA
// IPC, or threads); a rank with device buffers stages nothing at the first
// step, and if they are not all read in place every rank starts over, device
// buffers staged through pinned host memory (shm_allreduce.cpp says more).
//
// The same walk serves the hierarchical all-gather's node phase, where each
// rank contributes several blocks that already lie in its output
// (NodeBlocks): a step then stages the same piece of each.

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
  {
    const shm::PeerReads reading(node, plan.what);
    for (int q = 0; q < node.localSize(); ++q) {
      for (int k = 0; k < blocks.perRank; ++k) {
        work.copy(plan.c.recv + blocks.outputAt(q, k), peers.send[static_cast<size_t>(q)] + blocks.inputAt(q, k),
                  block);
      }
    }
    work.finish();
  }
  node.sync(plan.what);  // no rank reuses its input while another still reads it
}

// A block per slot-sized step, at least one element per block.
Pieces piecesOf(const Plan& plan, const shm::NodeArea& node, const NodeBlocks& blocks) {
  const size_t perRank = static_cast<size_t>(blocks.perRank);
  return {plan.c.blockBytes(), std::max(plan.c.typeSize, wholeElements(node.slotBytes() / perRank, plan.c.typeSize))};
}

// Where local rank q stages its piece of its k-th block at `step`.
std::byte* staged(shm::NodeArea& node, const NodeBlocks& blocks, uint64_t step, const Piece& piece, int q, int k) {
  return node.stage(q, step, static_cast<size_t>(blocks.perRank) * piece.bytes) + static_cast<size_t>(k) * piece.bytes;
}

// This rank's piece of each of its blocks, staged for `step`; `toOutput`:
// and copied into its own place in the output in the same pass.
void stageMine(const Plan& plan, shm::NodeArea& node, const NodeBlocks& blocks, uint64_t step, const Piece& piece,
               bool toOutput) {
  const int me = node.localRank();
  for (int k = 0; k < blocks.perRank; ++k) {
    std::byte* slot = staged(node, blocks, step, piece, me, k);
    const std::byte* in = blocks.input + blocks.inputAt(me, k) + piece.offset;
    std::byte* out = plan.c.recv + blocks.outputAt(me, k) + piece.offset;
    if (toOutput && out != in) {
      plan.copyToBoth(slot, out, in, piece.bytes);
    } else {
      plan.copy(slot, in, piece.bytes);
    }
  }
}

// Step by step through the segment; `firstStep`: the step at which the first
// piece is already staged and arrived, if it is.
void gatherPieces(const Plan& plan, shm::NodeArea& node, const NodeBlocks& blocks, const Pieces& pieces,
                  std::optional<uint64_t> firstStep) {
  const int n = node.localSize();
  const int me = node.localRank();
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const bool arrived = i == 0 && firstStep;
    const uint64_t step = arrived ? *firstStep : node.nextStep();
    // Where there are several pieces, each is copied into the output as it
    // is staged, in one pass; a single one after the peers may take it.
    const bool stagedOut = !arrived && pieces.count() > 1;
    if (!arrived) {
      stageMine(plan, node, blocks, step, piece, stagedOut);
      node.arrive(step, plan.what);
    }
    for (int q = 0; q < n; ++q) {
      if (q == me && stagedOut) continue;
      for (int k = 0; k < blocks.perRank; ++k) {
        std::byte* out = plan.c.recv + blocks.outputAt(q, k) + piece.offset;
        const std::byte* in = q == me ? blocks.input + blocks.inputAt(me, k) + piece.offset
                                      : staged(node, blocks, step, piece, q, k);
        plan.copy(out, in, piece.bytes);
      }
    }
  }
}

// The plain all-gather's call whose block fits one slot (most small calls):
// gatherPieces' one step, without its walk of NodeBlocks and pieces. This
// rank's block staged and published; its own block copied out of its input
// while its peers may still stage theirs; then theirs.
void gatherInOneStep(const Plan& plan, shm::NodeArea& node) {
  const size_t block = plan.c.blockBytes();
  const int me = node.localRank();
  const uint64_t step = node.nextStep();
  plan.copy(node.stage(me, step, block), plan.c.send, block);
  node.publish(step);
  plan.copy(plan.c.recv + static_cast<size_t>(me) * block, plan.c.send, block);
  node.awaitArrivals(step, plan.what);
  for (int q = 0; q < node.localSize(); ++q) {
    if (q != me) plan.copy(plan.c.recv + static_cast<size_t>(q) * block, node.stage(q, step, block), block);
  }
}

// How far the blocks reach in the output.
size_t outputBytes(const shm::NodeArea& node, const NodeBlocks& blocks, size_t block) {
  size_t bytes = 0;
  for (int q = 0; q < node.localSize(); ++q) {
    for (int k = 0; k < blocks.perRank; ++k) bytes = std::max(bytes, blocks.outputAt(q, k) + block);
  }
  return bytes;
}

NodeBlocks allGatherBlocks(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  return {.input = plan.c.send,
          .inputBytes = block,
          .perRank = 1,
          .block = block,
          .inputByRank = false,
          .outputByRank = true,
          .hostRanks = nullptr};
}

}  // namespace

void shmGatherBlocks(const Plan& plan, const NodeBlocks& blocks) {
  shm::NodeArea& node = startOnNode(plan);
  const Pieces pieces = piecesOf(plan, node, blocks);
  if (pieces.count() == 1) {
    gatherPieces(plan, node, blocks, pieces, std::nullopt);
    return;
  }
  node.offerBuffers(blocks.input, blocks.inputBytes, plan.c.recv, outputBytes(node, blocks, plan.c.blockBytes()));
  const uint64_t first = node.nextStep();
  stageMine(plan, node, blocks, first, pieces[0], /*toOutput=*/false);
  node.arrive(first, plan.what);
  if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr) {
    HostWork work(plan.executor);
    readInPlace(plan, node, *peers, blocks, work);
    return;
  }
  // Where a rank with device buffers staged nothing, every rank starts over.
  gatherPieces(plan, node, blocks, pieces, node.deviceOffered() ? std::nullopt : std::optional(first));
}

void shmAllGather(const Plan& plan) {
  if (!touchesDevice(plan.c)) {
    if (plan.c.blockBytes() <= plan.node->slotBytes()) {
      gatherInOneStep(plan, startOnNode(plan));
      return;
    }
    shmGatherBlocks(plan, allGatherBlocks(plan));
    return;
  }
  shm::NodeArea& node = startOnNode(plan);
  const NodeBlocks blocks = allGatherBlocks(plan);
  const Pieces pieces = piecesOf(plan, node, blocks);
  if (pieces.count() > 1 &&
      readDeviceInPlace(plan, node, blocks.input, blocks.inputBytes, plan.c.recv,
                        outputBytes(node, blocks, plan.c.blockBytes()),
                        [&](const shm::PeerBuffers& peers, LocalWork& work) {
                          readInPlace(plan, node, peers, blocks, work);
                        })) {
    return;
  }
  onHostBuffers(plan, [&](const Plan& p) { gatherPieces(p, node, allGatherBlocks(p), pieces, std::nullopt); });
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
    .foldsInRankOrder = true,
    .readsDevice = true};

}  // namespace loom::coll
