// Shared-memory broadcast among the ranks of one node: per step the root
// stages a piece, everyone arrives (the others to say they are done with the
// step before the last, so the root may reuse its buffer), and every other
// rank copies the piece out of the root's slot.
//
// When the message takes more than one step and the root's input is
// reachable here (loomMemAlloc'd, or ranks that are threads of one process),
// the first step's arrive tells every rank where it is, and they copy the
// rest straight from it (readInPlace): one copy instead of two, and the root
// stages nothing more.

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

}  // namespace

void shmBroadcast(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const int root = plan.c.root;  // one node: communicator ranks are local ranks
  const bool isRoot = node.localRank() == root;
  const size_t bytes = plan.c.blockBytes();
  const Pieces pieces(bytes, wholeElements(node.slotBytes(), plan.c.typeSize));
  if (pieces.count() > 1) node.offerBuffers(plan.c.send, isRoot ? bytes : 0, nullptr, 0);

  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const uint64_t step = node.nextStep();
    if (isRoot) plan.copy(node.stage(root, step, piece.bytes), plan.c.send + piece.offset, piece.bytes);
    node.arrive(step, plan.what);
    const std::byte* from = isRoot ? plan.c.send + piece.offset : node.stage(root, step, piece.bytes);
    plan.copy(plan.c.recv + piece.offset, from, piece.bytes);
    if (const shm::PeerBuffers* peers = node.peerBuffers(); peers != nullptr && i == 0) {
      readInPlace(plan, node, *peers, piece.bytes);
      return;
    }
  }
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
    .foldsInRankOrder = true};

}  // namespace loom::coll
