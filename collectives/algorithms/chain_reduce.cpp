// Pipelined chain reduce: the ranks form a chain along the ring ending at
// the root (the one after it on the ring, ..., the root); partial sums stream down it slot by slot,
// each rank adding its own input, and the root stores the total.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

void chainReduce(const Plan& plan) {
  const int n = plan.nranks;
  const Ring& ring = *plan.ring;
  const int self = ring.position(plan.rank);
  const int position = ringIndex(self - ring.position(plan.c.root) - 1, n);  // n-1 at the root
  const int prev = position == 0 ? -1 : ring.at(self - 1);
  const int next = position == n - 1 ? -1 : ring.at(self + 1);
  const size_t bytes = plan.c.blockBytes();
  Links links = plan.links();
  const auto prims = plan.primitives(links, prev, next);

  if (position == 0) prims->send(plan.c.send, bytes);
  else if (next >= 0) prims->recvReduceSend(plan.c.send, bytes);
  else prims->recvReduceCopy(plan.c.send, plan.c.recv, bytes);
  links.flush();
}

namespace {

// n-1 steps to fill the pipeline; the whole buffer through each link.
double chainReduceCost(const CostModel& m, size_t bytes) { return m.overLinks(m.n() - 1, static_cast<double>(bytes)); }

}  // namespace

extern const AlgorithmEntry kChainReduce{
    .name = "ring", .kind = CollectiveKind::Reduce, .run = chainReduce, .costUs = chainReduceCost};

}  // namespace loom::coll
