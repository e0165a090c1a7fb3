// Shared-memory scatter from a root among the ranks of one node: per step the
// root stages a piece of each other rank's block (a slot's 1/n each) in its
// slot, every rank arrives (the others to say they are done with the step
// before the last, so the root may reuse that buffer), and each copies its
// piece out of the root's slot; the root's own block goes straight from its
// input. One synchronization per step, at which the root waits for no one
// and the others for the root alone (NodeArea::depart, arriveFrom).
//
// When a block takes more than one step and the root's input is reachable
// here (loomMemAlloc'd, or ranks that are threads of one process), the first
// step's arrive tells every rank where it is, and they copy the rest of
// their blocks straight from it (readBlockInPlace); a last synchronization keeps
// it alive until all have. Device buffers (CUDA) on one GPU are copied so
// too, whole, by each rank's device; a rank that offers device memory (the
// root its input, the others their outputs) stages nothing at the first
// step, and if they are not all read in place every rank starts over on the
// staged path (shm_allreduce.cpp says more).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

// After the first step's arrive: this rank's block of the root's input from
// `from` on (the CPU's work, past the first piece it staged) or whole (the
// device's), copied by `work`.
void readBlockInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers, size_t from,
                      LocalWork& work) {
  const size_t block = plan.c.blockBytes();
  const size_t mine = static_cast<size_t>(node.localRank()) * block;
  const bool isRoot = node.localRank() == plan.c.root;
  const std::byte* in = (isRoot ? plan.c.send : peers.send[static_cast<size_t>(plan.c.root)]) + mine + from;
  {
    const shm::PeerReads reading(node, plan.what);
    work.copy(plan.c.recv + from, in, block - from);
    work.finish();
  }
  node.sync(plan.what);  // the root keeps its input until every rank has read it
}

// Where the root stages its piece for local rank `to` at `step`.
std::byte* stagedByRoot(shm::NodeArea& node, int root, uint64_t step, const Piece& piece, int to) {
  return node.stage(root, step, static_cast<size_t>(node.localSize()) * piece.bytes) +
         static_cast<size_t>(to) * piece.bytes;
}

// The steps through the segment, from the first piece; `first`: whether this call
// offers the root's input at its first step (every rank alike). If a rank
// with device buffers offered there, the root may have staged nothing, and
// every rank starts over.
void scatterSteps(const Plan& plan, shm::NodeArea& node, const Pieces& pieces, FirstStep first) {
  const bool offer = first == FirstStep::Offer;
  const int root = plan.c.root;  // one node: communicator ranks are local ranks
  const int me = node.localRank();
  const size_t block = plan.c.blockBytes();
  const size_t all = block * static_cast<size_t>(node.localSize());
  if (offer) node.offerBuffers(plan.c.send, me == root ? all : 0, nullptr, 0);
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    // The others stage nothing, nor the root if its pieces fit its arrival
    // line: they may run ahead (NodeArea::nextLineStep).
    const bool inLine = me != root || static_cast<size_t>(node.localSize()) * piece.bytes <= shm::kArrivalBytes;
    const uint64_t step = inLine && !offer ? node.nextLineStep() : node.nextStep();
    if (me == root) {
      for (int q = 0; q < node.localSize(); ++q) {
        if (q == root) continue;
        const std::byte* in = plan.c.send + static_cast<size_t>(q) * block + piece.offset;
        plan.copy(stagedByRoot(node, root, step, piece, q), in, piece.bytes);
      }
    }
    if (offer) {
      node.arrive(step, plan.what);  // every rank's offer is resolved here
    } else if (me == root) {
      node.depart(step, plan.what);  // it reads nothing: the others catch up while it goes on
    } else {
      node.arriveFrom(root, step, plan.what);  // it reads the root's staging alone
    }
    if (i == 0 && offer && node.deviceOffered()) {
      scatterSteps(plan, node, pieces, FirstStep::Stage);
      return;
    }
    const std::byte* in = me == root ? plan.c.send + static_cast<size_t>(root) * block + piece.offset
                                     : stagedByRoot(node, root, step, piece, me);
    plan.copy(plan.c.recv + piece.offset, in, piece.bytes);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0 && offer) {
      HostWork work(plan.executor);
      readBlockInPlace(plan, node, *peers, piece.bytes, work);
      return;
    }
  }
}

}  // namespace

void shmScatter(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const bool isRoot = node.localRank() == plan.c.root;
  const size_t block = plan.c.blockBytes();
  const size_t all = block * static_cast<size_t>(node.localSize());
  const Pieces pieces = piecesPerBlock(plan, node);
  // The device path is for a rank whose offered buffer is device memory (the
  // root's input, a receiver's output): a rank that offers host memory takes
  // the host's steps, any other device buffer of its staged around them.
  const memory::MemoryKind offered = isRoot ? plan.c.sendKind : plan.c.recvKind;
  if (offered != memory::MemoryKind::CudaDevice) {
    onHostBuffers(plan, [&](const Plan& p) { scatterSteps(p, node, pieces, firstStepFor(pieces)); });
    return;
  }
  if (pieces.count() > 1 &&
      readDeviceInPlace(plan, node, plan.c.send, isRoot ? all : 0, plan.c.recv, isRoot ? 0 : block,
                        [&](const shm::PeerBuffers& peers, LocalWork& work) {
                          readBlockInPlace(plan, node, peers, 0, work);
                        })) {
    return;
  }
  onHostBuffers(plan, [&](const Plan& p) { scatterSteps(p, node, pieces, FirstStep::Stage); });
}

// Per slot-sized piece: one arrival; the root's link carries n - 1 blocks, as direct's does.
extern const AlgorithmEntry kShmScatter{
    .name = "shm",
    .kind = CollectiveKind::Scatter,
    .run = shmScatter,
    .costUs = [](const CostModel& m, size_t bytes) {
      [[maybe_unused]] const double s = static_cast<double>(bytes);
      return m.onSharedNode(1, (m.n() - 1) * s);
    },
    .needs = Needs::NodeSegment,
    .foldsInRankOrder = true,
    .readsDevice = true};

}  // namespace loom::coll
