// Reductions folded in rank order: every rank receives the other ranks'
// contributions to the part it reduces, straight from them, and folds them
// with its own in rank order in one pass: the order and kernel of the
// shared-segment algorithms, so across nodes too the bits do not depend on
// the algorithm, the message size or the rank that computes them
// (LOOM_DETERMINISTIC). The price is memory: a rank holds its peers' parts
// at once, (n-1) x its part.
//
//   reduce-scatter: rank r receives block r from every peer and sends block q to q;
//   all-reduce:     the same over n slices, then every rank sends its reduced
//                   slice to every other (an all-gather);
//   reduce:         the root receives every rank's whole buffer.
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/exchange.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {
namespace {

struct Part {
  const std::byte* data;
  size_t bytes;
};

// One fold: receives `bytes` from every other rank and folds them with ours,
// in rank order, into `dst`; meanwhile sends every other rank q the part of
// our input that it folds.
class RankOrderFold {
 public:
  RankOrderFold(const Plan& plan, size_t bytes)
      : plan_(plan), bytes_(bytes), received_(plan.received->get(bytes * static_cast<size_t>(plan.nranks - 1))) {}

  // `outgoing(q)`: the Part of our input that rank q folds; `own`: ours.
  template <class Outgoing>
  void run(Outgoing&& outgoing, const std::byte* own, std::byte* dst) {
    Exchange exchange(plan_);
    std::vector<const void*> sources(static_cast<size_t>(plan_.nranks));
    size_t slot = 0;
    for (int q = 0; q < plan_.nranks; ++q) {
      if (q == plan_.rank) {
        sources[static_cast<size_t>(q)] = own;
        continue;
      }
      std::byte* into = received_.data() + slot++ * bytes_;
      if (bytes_ != 0) exchange.recv(q, into, bytes_);
      const auto [part, partBytes] = outgoing(q);
      if (partBytes != 0) exchange.send(q, part, partBytes);
      sources[static_cast<size_t>(q)] = into;
    }
    exchange.run();
    if (bytes_ != 0) plan_.reduce(sources, dst, bytes_ / plan_.c.typeSize);
  }

 private:
  const Plan& plan_;
  size_t bytes_;
  std::span<std::byte> received_;
};

}  // namespace

void directReduceScatter(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  const std::byte* in = plan.c.send;
  RankOrderFold fold(plan, block);
  fold.run([&](int q) { return Part{in + static_cast<size_t>(q) * block, block}; },
           in + static_cast<size_t>(plan.rank) * block, plan.c.recv);
}

void directAllReduce(const Plan& plan) {
  const int n = plan.nranks;
  const size_t total = plan.c.blockBytes();
  auto slice = [&](int k) { return sliceOf(total, plan.c.typeSize, n, k); };
  const Slice mine = slice(plan.rank);
  const std::byte* in = plan.c.send;

  // Reduce-scatter: slice r folded on rank r. The sends complete before the
  // fold writes, so in place the input is read before it is overwritten.
  RankOrderFold fold(plan, mine.bytes);
  fold.run([&](int q) { return Part{in + slice(q).offset, slice(q).bytes}; }, in + mine.offset,
           plan.c.recv + mine.offset);

  // All-gather of the folded slices.
  Exchange exchange(plan);
  for (int q = 0; q < n; ++q) {
    if (q == plan.rank) continue;
    if (slice(q).bytes != 0) exchange.recv(q, plan.c.recv + slice(q).offset, slice(q).bytes);
    if (mine.bytes != 0) exchange.send(q, plan.c.recv + mine.offset, mine.bytes);
  }
  exchange.run();
}

void directReduce(const Plan& plan) {
  const size_t total = plan.c.blockBytes();
  const int root = plan.c.root;
  if (plan.rank != root) {
    Exchange exchange(plan);
    if (total != 0) exchange.send(root, plan.c.send, total);
    exchange.run();
    return;
  }
  RankOrderFold fold(plan, total);
  fold.run([](int) { return Part{nullptr, 0}; }, plan.c.send, plan.c.recv);
}

namespace {

// One exchange (two for the all-reduce: a reduce-scatter, then an
// all-gather) of every peer's message at once, folded after it arrives.
double exchangeSteps(const CostModel& m) { return 1 + CostModel::kPerPeerFraction * (m.n() - 1); }

// n slices of bytes / n each fold.
double reduceScatterCost(const CostModel& m, size_t bytes) {
  const double s = static_cast<double>(bytes);
  return m.overLinks(exchangeSteps(m), (m.n() - 1) / m.n() * s, s);
}

double allReduceCost(const CostModel& m, size_t bytes) {
  const double s = static_cast<double>(bytes);
  return m.overLinks(2 * exchangeSteps(m), 2 * (m.n() - 1) / m.n() * s, s);
}

// The root receives and folds everything.
double reduceCost(const CostModel& m, size_t bytes) {
  const double s = static_cast<double>(bytes);
  return m.overLinks(exchangeSteps(m), (m.n() - 1) * s, m.n() * s);
}

}  // namespace

extern const AlgorithmEntry kDirectReduceScatter{
    .name = "direct", .kind = CollectiveKind::ReduceScatter, .run = directReduceScatter, .costUs = reduceScatterCost,
    .foldsInRankOrder = true};
extern const AlgorithmEntry kDirectAllReduce{
    .name = "direct", .kind = CollectiveKind::AllReduce, .run = directAllReduce, .costUs = allReduceCost,
    .foldsInRankOrder = true};
extern const AlgorithmEntry kDirectReduce{
    .name = "direct", .kind = CollectiveKind::Reduce, .run = directReduce, .costUs = reduceCost,
    .foldsInRankOrder = true};

}  // namespace loom::coll
