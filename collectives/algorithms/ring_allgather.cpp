// Ring all-gather: each rank's block travels once around the ring; at step j
// rank r stores and forwards the block of rank r-j, and the last block to
// arrive (rank r+1's) is only stored. Blocks go around in chunks of at most
// one FIFO, one pass per chunk.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

void ringAllGather(const Plan& plan) {
  const int n = plan.nranks;
  const int r = plan.rank;
  const size_t block = plan.c.blockBytes();
  Links links(plan.comm.engine(), plan.what);
  Primitives prims = plan.primitives(links, ringIndex(r - 1, n), ringIndex(r + 1, n));
  const bool inPlace = plan.c.send == plan.c.recv + static_cast<size_t>(r) * block;

  for (size_t base = 0; base < block; base += plan.chunkBytes) {
    const size_t len = std::min(plan.chunkBytes, block - base);
    auto at = [&](int k) { return plan.c.recv + static_cast<size_t>(ringIndex(k, n)) * block + base; };
    if (inPlace) prims.send(at(r), len);
    else prims.copySend(plan.c.send + base, at(r), len);
    for (int j = 1; j < n - 1; ++j) prims.recvCopySend(at(r - j), len);
    prims.recv(at(r + 1), len);
  }
  links.flush();
}

}  // namespace loom::coll
