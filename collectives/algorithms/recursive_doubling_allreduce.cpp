// Recursive-doubling all-reduce for small messages (Thakur, Rabenseifner and
// Gropp): in log2(p) steps each rank exchanges its whole partial result with
// the rank whose index differs in one bit, and both combine the two. With n
// not a power of two, the first 2(n-p) ranks fold in pairs first (even ranks
// hand their data to the odd neighbour and sit out) and get the result back
// at the end. Operands are always combined lower rank first, so both
// partners compute the same bits.
#include <array>
#include <bit>

#include "base/copy_bytes.hpp"
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"

namespace loom::coll {

void recursiveDoublingAllReduce(const Plan& plan) {
  const int n = plan.nranks;
  const int r = plan.rank;
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int rem = n - p;
  const size_t bytes = plan.c.blockBytes();
  const size_t count = plan.c.count;
  std::byte* acc = plan.c.recv;
  plan.copy(acc, plan.c.send, bytes);
  Links links = plan.links();

  // Fold: rank 2i hands its data to 2i+1.
  int newRank = r < 2 * rem ? (r % 2 == 1 ? r / 2 : -1) : r - rem;
  if (r < 2 * rem) {
    if (r % 2 == 0) plan.primitives(links, -1, r + 1)->send(acc, bytes);
    else plan.primitives(links, r - 1, -1)->recvReduceCopy(acc, acc, bytes);
  }

  if (newRank >= 0) {
    const std::span<std::byte> theirs = plan.received->get(bytes);
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partnerNew = newRank ^ mask;
      const int partner = partnerNew < rem ? partnerNew * 2 + 1 : partnerNew + rem;
      plan.primitives(links, partner, partner)->sendRecv(acc, theirs.data(), bytes);
      const void* lower = partner < r ? static_cast<const void*>(theirs.data()) : acc;
      const void* higher = partner < r ? static_cast<const void*>(acc) : theirs.data();
      const std::array<const void*, 2> sources{lower, higher};
      plan.reduce(sources, acc, count);
    }
  }

  // Unfold: 2i+1 returns the result to 2i.
  if (r < 2 * rem) {
    if (r % 2 == 1) plan.primitives(links, -1, r - 1)->send(acc, bytes);
    else plan.primitives(links, r + 1, -1)->recv(acc, bytes);
  }
  links.flush();
}

namespace {

// log2(n) whole-buffer exchanges (two more when n is not a power of two),
// each folded after it arrives: ours and theirs.
double recursiveDoublingAllReduceCost(const CostModel& m, size_t bytes) {
  const double s = static_cast<double>(bytes);
  const bool powerOfTwo = std::has_single_bit(static_cast<unsigned>(m.layout.nranks));
  const double steps = CostModel::log2Ceil(m.layout.nranks) + (powerOfTwo ? 0 : 2);
  return m.overLinks(steps, steps * s, 2 * CostModel::log2Ceil(m.layout.nranks) * s);
}

}  // namespace

extern const AlgorithmEntry kRecursiveDoublingAllReduce{
    .name = "rd",
    .kind = CollectiveKind::AllReduce,
    .run = recursiveDoublingAllReduce,
    .costUs = recursiveDoublingAllReduceCost};

}  // namespace loom::coll
