// Ring all-reduce (Patarasuk and Yuan; NCCL's ring): the buffer is cut into
// loops of nranks slices. In each loop, a reduce-scatter pass sends every
// slice once around the ring, each rank adding its own part as the slice
// passes, until rank r holds the full sum of slice r+1; an all-gather pass
// then carries the finished slices around once more. Each primitive streams
// slot by slot, so the 2(n-1) steps pipeline through the FIFOs. Ranks and
// slices are numbered by ring position (the topology's order).
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/ring_walk.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

void ringAllReduce(const Plan& plan) {
  RingWalk walk(plan);
  const int n = walk.n, r = walk.position;
  Links& links = walk.links;
  Primitives& prims = *walk.prims;
  const size_t total = plan.c.blockBytes();
  const size_t loopBytes = plan.chunkBytes * static_cast<size_t>(n);

  for (size_t base = 0; base < total; base += loopBytes) {
    const size_t len = std::min(loopBytes, total - base);
    const std::byte* in = plan.c.send + base;
    std::byte* out = plan.c.recv + base;
    auto slice = [&](int k) { return sliceOf(len, plan.c.typeSize, n, ringIndex(k, n)); };

    // Reduce-scatter: at step j, position r adds its part of slice r-j and passes it on.
    Slice s = slice(r);
    prims.send(in + s.offset, s.bytes);
    for (int j = 1; j < n - 1; ++j) {
      s = slice(r - j);
      prims.recvReduceSend(in + s.offset, s.bytes);
    }
    // Slice r+1 is complete here: keep it and start it around the ring.
    s = slice(r + 1);
    prims.recvReduceCopySend(in + s.offset, out + s.offset, s.bytes);

    // All-gather: at step j, position r keeps and forwards finished slice r+1-j.
    for (int j = 1; j < n - 1; ++j) {
      s = slice(r + 1 - j);
      prims.recvCopySend(out + s.offset, s.bytes);
    }
    s = slice(r + 2);
    prims.recv(out + s.offset, s.bytes);
  }
  links.flush();
}

namespace {

// 2(n-1) steps; each moves a 1/n slice through every rank's link twice.
double ringAllReduceCost(const CostModel& m, size_t bytes) {
  const double s = static_cast<double>(bytes);
  return m.overLinks(2 * (m.n() - 1), 2 * (m.n() - 1) / m.n() * s);
}

}  // namespace

extern const AlgorithmEntry kRingAllReduce{
    .name = "ring", .kind = CollectiveKind::AllReduce, .run = ringAllReduce, .costUs = ringAllReduceCost};

}  // namespace loom::coll
