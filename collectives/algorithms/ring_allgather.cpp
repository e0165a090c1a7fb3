// Ring all-gather: each rank's block travels once around the ring; at step j
// the rank at ring position p stores and forwards the block of the rank at
// position p-j, and the last block to arrive (position p+1's) is only stored.
// Blocks go around in chunks of at most one FIFO, one pass per chunk.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/ring_walk.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

void ringAllGather(const Plan& plan) {
  RingWalk walk(plan);
  const Ring& ring = walk.ring;
  const int n = walk.n, p = walk.position;
  Links& links = walk.links;
  Primitives& prims = *walk.prims;
  const size_t block = plan.c.blockBytes();
  const bool inPlace = plan.c.send == plan.c.recv + static_cast<size_t>(plan.rank) * block;

  for (size_t base = 0; base < block; base += plan.chunkBytes) {
    const size_t len = std::min(plan.chunkBytes, block - base);
    // The block of the rank at position k.
    auto at = [&](int k) { return plan.c.recv + static_cast<size_t>(ring.at(k)) * block + base; };
    if (inPlace) prims.send(at(p), len);
    else prims.copySend(plan.c.send + base, at(p), len);
    for (int j = 1; j < n - 1; ++j) prims.recvCopySend(at(p - j), len);
    prims.recv(at(p + 1), len);
  }
  links.flush();
}

namespace {

// n-1 steps; `bytes` is the whole n-block output, of which n-1 blocks arrive.
double ringAllGatherCost(const CostModel& m, size_t bytes) {
  return m.overLinks(m.n() - 1, (m.n() - 1) / m.n() * static_cast<double>(bytes));
}

}  // namespace

extern const AlgorithmEntry kRingAllGather{
    .name = "ring", .kind = CollectiveKind::AllGather, .run = ringAllGather, .costUs = ringAllGatherCost};

}  // namespace loom::coll
