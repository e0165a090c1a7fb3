// Shared-memory gather to a root among the ranks of one node: per step every
// other rank stages a piece of its block, arrives, and the root copies each
// piece out of their slots into its output (its own block straight from its
// input). One synchronization per step; the two buffers of the segment keep
// a rank from staging over a slot the root has not read yet. The others read
// nothing, so they do not wait for it (NodeArea::depart): a small gather's
// others stream their pieces through their arrival lines.
//
// When a block takes more than one step and every offered buffer is
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells the root where the others' inputs are, and
// it copies the rest of each straight from there (rootReadsInPlace); a last
// synchronization keeps the inputs alive until it has. Device buffers (CUDA)
// on one GPU are copied so too, whole, by the root's device; a rank that
// offers device memory (its input; the root, its output) stages nothing at
// the first step, and if they are not all read in place every rank starts
// over on the staged path (shm_allreduce.cpp says more).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

// The root, after the first step's arrive: every rank's input from `from`
// on (the CPU's work, past the first piece it staged) or whole (the device's),
// copied by `work`.
void rootReadsInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers, size_t from,
                      LocalWork& work) {
  const size_t block = plan.c.blockBytes();
  if (node.localRank() == plan.c.root) {
    const shm::PeerReads reading(node, plan.what);
    for (int q = 0; q < node.localSize(); ++q) {
      std::byte* to = plan.c.recv + static_cast<size_t>(q) * block + from;
      const std::byte* in = q == plan.c.root ? plan.c.send + from : peers.send[static_cast<size_t>(q)] + from;
      work.copy(to, in, block - from);
    }
    work.finish();
  }
  node.sync(plan.what);  // no rank reuses its input while the root still reads it
}

// The steps through the segment, from the first piece; `first`: whether this call
// offers the inputs at its first step (every rank alike). If a rank with
// device buffers offered there, it may have staged nothing, and every rank
// starts over.
void gatherSteps(const Plan& plan, shm::NodeArea& node, const Pieces& pieces, FirstStep first) {
  const bool offer = first == FirstStep::Offer;
  const int root = plan.c.root;  // one node: communicator ranks are local ranks
  const int me = node.localRank();
  const size_t block = plan.c.blockBytes();
  if (offer) node.offerBuffers(plan.c.send, me == root ? 0 : block, nullptr, 0);
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    // The root stages nothing, nor another rank whose piece fits its arrival
    // line in a slot: they may run ahead (NodeArea::nextLineStep).
    const bool inLine = me == root || piece.bytes <= shm::kArrivalBytes;
    const uint64_t step = inLine && !offer ? node.nextLineStep() : node.nextStep();
    if (me != root) plan.copy(node.stage(me, step, piece.bytes), plan.c.send + piece.offset, piece.bytes);
    if (me != root && !offer) {
      node.depart(step, plan.what);  // the root reads its piece; it reads nothing
    } else {
      node.arrive(step, plan.what);
    }
    if (i == 0 && offer && node.deviceOffered()) {
      gatherSteps(plan, node, pieces, FirstStep::Stage);
      return;
    }
    if (me == root) {
      for (int q = 0; q < node.localSize(); ++q) {
        const std::byte* in = q == root ? plan.c.send + piece.offset : node.stage(q, step, piece.bytes);
        plan.copy(plan.c.recv + static_cast<size_t>(q) * block + piece.offset, in, piece.bytes);
      }
    }
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0 && offer) {
      HostWork work(plan.executor);
      rootReadsInPlace(plan, node, *peers, piece.bytes, work);
      return;
    }
  }
}

}  // namespace

void shmGather(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const bool isRoot = node.localRank() == plan.c.root;
  const size_t block = plan.c.blockBytes();
  const size_t all = block * static_cast<size_t>(node.localSize());
  const Pieces pieces(block, wholeElements(node.slotBytes(), plan.c.typeSize));
  // The device path is for a rank whose offered buffer is device memory (a
  // sender's input, the root's output): a rank that offers host memory takes
  // the host's steps, any other device buffer of its staged around them.
  const memory::MemoryKind offered = isRoot ? plan.c.recvKind : plan.c.sendKind;
  if (offered != memory::MemoryKind::CudaDevice) {
    onHostBuffers(plan, [&](const Plan& p) { gatherSteps(p, node, pieces, firstStepFor(pieces)); });
    return;
  }
  if (pieces.count() > 1 &&
      readDeviceInPlace(plan, node, plan.c.send, isRoot ? 0 : block, plan.c.recv, isRoot ? all : 0,
                        [&](const shm::PeerBuffers& peers, LocalWork& work) {
                          rootReadsInPlace(plan, node, peers, 0, work);
                        })) {
    return;
  }
  onHostBuffers(plan, [&](const Plan& p) { gatherSteps(p, node, pieces, FirstStep::Stage); });
}

// Per slot-sized piece: one arrival; the root's link carries n - 1 blocks, as direct's does.
extern const AlgorithmEntry kShmGather{
    .name = "shm",
    .kind = CollectiveKind::Gather,
    .run = shmGather,
    .costUs = [](const CostModel& m, size_t bytes) {
      [[maybe_unused]] const double s = static_cast<double>(bytes);
      return m.onSharedNode(1, (m.n() - 1) * s);
    },
    .needs = Needs::NodeSegment,
    .foldsInRankOrder = true,
    .readsDevice = true};

}  // namespace loom::coll
