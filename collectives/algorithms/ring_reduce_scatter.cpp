// Ring reduce-scatter: the block of the rank at ring position k starts at
// position k+1 and travels the ring, each rank adding its own part, so that
// it is complete when it reaches its owner. At step j position p handles the
// block of position p-1-j. Blocks go around in chunks of at most one FIFO,
// one pass per chunk.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/ring_walk.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

void ringReduceScatter(const Plan& plan) {
  RingWalk walk(plan);
  const Ring& ring = walk.ring;
  const int n = walk.n, p = walk.position;
  Links& links = walk.links;
  Primitives& prims = *walk.prims;
  const size_t block = plan.c.blockBytes();

  for (size_t base = 0; base < block; base += plan.chunkBytes) {
    const size_t len = std::min(plan.chunkBytes, block - base);
    // This rank's input for the block of the rank at position k.
    auto in = [&](int k) { return plan.c.send + static_cast<size_t>(ring.at(k)) * block + base; };
    prims.send(in(p - 1), len);
    for (int j = 1; j < n - 1; ++j) prims.recvReduceSend(in(p - 1 - j), len);
    prims.recvReduceCopy(in(p), plan.c.recv + base, len);
  }
  links.flush();
}

namespace {

// n-1 steps; `bytes` is the whole n-block input, of which n-1 blocks leave.
double ringReduceScatterCost(const CostModel& m, size_t bytes) {
  return m.overLinks(m.n() - 1, (m.n() - 1) / m.n() * static_cast<double>(bytes));
}

}  // namespace

extern const AlgorithmEntry kRingReduceScatter{
    .name = "ring", .kind = CollectiveKind::ReduceScatter, .run = ringReduceScatter, .costUs = ringReduceScatterCost};

}  // namespace loom::coll
