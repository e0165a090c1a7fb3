// Ring reduce-scatter: block k starts at rank k+1 and travels the ring,
// each rank adding its own block k, so that it is complete when it reaches
// rank k. At step j rank r handles block r-1-j. Blocks go around in chunks
// of at most one FIFO, one pass per chunk.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

void ringReduceScatter(const Plan& plan) {
  const int n = plan.nranks;
  const int r = plan.rank;
  const size_t block = plan.c.blockBytes();
  Links links(plan.comm.engine(), plan.what);
  Primitives prims = plan.primitives(links, ringIndex(r - 1, n), ringIndex(r + 1, n));

  for (size_t base = 0; base < block; base += plan.chunkBytes) {
    const size_t len = std::min(plan.chunkBytes, block - base);
    auto in = [&](int k) { return plan.c.send + static_cast<size_t>(ringIndex(k, n)) * block + base; };
    prims.send(in(r - 1), len);
    for (int j = 1; j < n - 1; ++j) prims.recvReduceSend(in(r - 1 - j), len);
    prims.recvReduceCopy(in(r), plan.c.recv + base, len);
  }
  links.flush();
}

}  // namespace loom::coll
