// Shared-memory broadcast among the ranks of one node: per step the root
// stages a piece, everyone arrives (the others to say they are done with the
// step before the last, so the root may reuse its buffer), and every other
// rank copies the piece out of the root's slot.
//
// The root reads nothing and each receiver reads only the root's staging,
// so none waits for every rank (NodeArea::depart, arriveFrom): the root
// returns once its piece is staged, and a receiver once it has the root's.
// Small broadcasts (a piece in the root's arrival line) so stream up to
// kArrivalDepth calls ahead of the slowest receiver, as Open MPI's root
// streams them into its FIFO.
//
// When the message takes more than one step and the root's input is
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells every rank where it is, and they copy the
// rest straight from it (readInPlace): one copy instead of two, and the root
// stages nothing more.
//
// Device buffers (CUDA) on one GPU, every rank's, are copied so too, whole,
// by each rank's device; a root with device buffers stages nothing at the
// first step, and if they are not all read in place every rank starts over
// on the staged path (shm_allreduce.cpp says more).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"

namespace loom::coll {
namespace {

// After the first step's arrive: everything past `from` comes straight from the root's input.
void readInPlace(const Plan& plan, shm::NodeArea& node, const shm::PeerBuffers& peers, size_t from) {
  const std::byte* rootInput = peers.send[static_cast<size_t>(plan.c.root)];
  {
    const shm::PeerReads reading(node, plan.what);
    plan.copy(plan.c.recv + from, rootInput + from, plan.c.blockBytes() - from);
  }
  node.sync(plan.what);  // the root keeps its input until every rank has read it
}

// The steps through the segment, from the first piece; `first`: whether this call
// offers the root's input at its first step (every rank alike). If a rank
// with device buffers offered there, the root may have staged nothing, and
// every rank starts over.
void broadcastSteps(const Plan& plan, shm::NodeArea& node, const Pieces& pieces, FirstStep first) {
  const bool offer = first == FirstStep::Offer;
  const int root = plan.c.root;  // one node: communicator ranks are local ranks
  const bool isRoot = node.localRank() == root;
  if (offer) node.offerBuffers(plan.c.send, isRoot ? plan.c.blockBytes() : 0, nullptr, 0);
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    // A receiver stages nothing, nor a root whose piece fits its arrival line:
    // they may run ahead of their peers (NodeArea::nextLineStep).
    const bool inLine = !isRoot || piece.bytes <= shm::kArrivalBytes;
    const uint64_t step = inLine && !offer ? node.nextLineStep() : node.nextStep();
    // A root out of place copies its piece out as it stages it, in one pass,
    // where it stages more than one: it is the one that copies twice. A
    // single piece it copies out after its receivers may take it.
    const bool rootCopiesOut = isRoot && pieces.count() > 1 && plan.c.recv != plan.c.send;
    if (rootCopiesOut) {
      plan.copyToBoth(node.stage(root, step, piece.bytes), plan.c.recv + piece.offset, plan.c.send + piece.offset,
                      piece.bytes);
    } else if (isRoot) {
      plan.copy(node.stage(root, step, piece.bytes), plan.c.send + piece.offset, piece.bytes);
    }
    if (offer) {
      node.arrive(step, plan.what);  // every rank's offer is resolved here
    } else if (isRoot) {
      node.depart(step, plan.what);  // it reads nothing: its receivers catch up while it goes on
    } else {
      node.arriveFrom(root, step, plan.what);  // it reads the root's staging alone
    }
    if (i == 0 && offer && node.deviceOffered()) {
      broadcastSteps(plan, node, pieces, FirstStep::Stage);
      return;
    }
    const std::byte* from = isRoot ? plan.c.send + piece.offset : node.stage(root, step, piece.bytes);
    if (!rootCopiesOut) plan.copy(plan.c.recv + piece.offset, from, piece.bytes);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0 && offer) {
      readInPlace(plan, node, *peers, piece.bytes);
      return;
    }
  }
}

// A host call whose message fits one slot (most small calls): broadcastSteps'
// one step without its offers and pieces. The root stages the message and
// departs; a receiver waits for the root alone and copies it out.
void broadcastInOneStep(const Plan& plan, shm::NodeArea& node) {
  const size_t bytes = plan.c.blockBytes();
  const int root = plan.c.root;
  if (node.localRank() == root) {
    const uint64_t step = bytes <= shm::kArrivalBytes ? node.nextLineStep() : node.nextStep();
    plan.copy(node.stage(root, step, bytes), plan.c.send, bytes);
    node.depart(step, plan.what);
    plan.copy(plan.c.recv, plan.c.send, bytes);
    return;
  }
  const uint64_t step = node.nextLineStep();
  node.arriveFrom(root, step, plan.what);
  plan.copy(plan.c.recv, node.stage(root, step, bytes), bytes);
}

}  // namespace

void shmBroadcast(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const bool isRoot = node.localRank() == plan.c.root;
  const size_t bytes = plan.c.blockBytes();
  if (!touchesDevice(plan.c) && bytes <= node.slotBytes()) {
    broadcastInOneStep(plan, node);
    return;
  }
  const Pieces pieces(bytes, wholeElements(node.slotBytes(), plan.c.typeSize));
  // The device path is for a rank whose offered buffer is device memory (a
  // root's input, a receiver's output): a rank that offers host memory takes
  // the host's steps, any other device buffer of its staged around them.
  const memory::MemoryKind offered = isRoot ? plan.c.sendKind : plan.c.recvKind;
  if (offered != memory::MemoryKind::CudaDevice) {
    onHostBuffers(plan, [&](const Plan& p) { broadcastSteps(p, node, pieces, firstStepFor(pieces)); });
    return;
  }
  // Device buffers on one GPU: every rank copies the root's input straight
  // into its output. The root offers its input, a receiver its output, so
  // that every rank's memory is seen (a receiver on the host offers nothing,
  // which keeps the call off the device path).
  const auto copyFromRoot = [&](const shm::PeerBuffers& peers, LocalWork& work) {
    {
      const shm::PeerReads reading(node, plan.what);
      work.copy(plan.c.recv, peers.send[static_cast<size_t>(plan.c.root)], bytes);
      work.finish();
    }
    node.sync(plan.what);  // the root keeps its input until every rank has read it
  };
  if (pieces.count() > 1 && readDeviceInPlace(plan, node, plan.c.send, isRoot ? bytes : 0, plan.c.recv,
                                               isRoot ? 0 : bytes, copyFromRoot)) {
    return;
  }
  onHostBuffers(plan, [&](const Plan& p) { broadcastSteps(p, node, pieces, FirstStep::Stage); });
}

// Per slot-sized piece: one arrival; the buffer staged once.
extern const AlgorithmEntry kShmBroadcast{
    .name = "shm",
    .kind = CollectiveKind::Broadcast,
    .run = shmBroadcast,
    .costUs = [](const CostModel& m, size_t bytes) {
      [[maybe_unused]] const double s = static_cast<double>(bytes);
      return m.onSharedNode(1, s);
    },
    .needs = Needs::NodeSegment,
    .foldsInRankOrder = true,
    .readsDevice = true};

}  // namespace loom::coll
