// Pipelined chain broadcast: the ranks form a chain along the ring starting
// at the root (root, the next on the ring, ..., the one before it); the data streams down it slot by slot, each
// rank storing and forwarding as it receives, so a large message costs about
// one transfer plus the time to fill the chain.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

void chainBroadcast(const Plan& plan) {
  const int n = plan.nranks;
  const Ring& ring = *plan.ring;
  const int self = ring.position(plan.rank);
  const int position = ringIndex(self - ring.position(plan.c.root), n);  // 0 at the root
  const int prev = position == 0 ? -1 : ring.at(self - 1);
  const int next = position == n - 1 ? -1 : ring.at(self + 1);
  const size_t bytes = plan.c.blockBytes();
  Links links = plan.links();
  const auto prims = plan.primitives(links, prev, next);

  if (position == 0) {
    if (plan.c.send == plan.c.recv) prims->send(plan.c.send, bytes);
    else prims->copySend(plan.c.send, plan.c.recv, bytes);
  } else if (next >= 0) {
    prims->recvCopySend(plan.c.recv, bytes);
  } else {
    prims->recv(plan.c.recv, bytes);
  }
  links.flush();
}

namespace {

// n-1 steps to fill the pipeline; the whole buffer through each link.
double chainBroadcastCost(const CostModel& m, size_t bytes) {
  return m.overLinks(m.n() - 1, static_cast<double>(bytes));
}

}  // namespace

extern const AlgorithmEntry kChainBroadcast{
    .name = "ring", .kind = CollectiveKind::Broadcast, .run = chainBroadcast, .costUs = chainBroadcastCost};

}  // namespace loom::coll
