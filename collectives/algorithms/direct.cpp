// Direct algorithms: every message goes straight to the rank that needs it,
// all of them posted at once on the engine (the point-to-point channel), so
// the engine interleaves them and nothing waits on a ring. All-to-all and
// all-gather exchange with every peer; gather and scatter go to and from
// the root. A rank's own block is a local copy.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/exchange.hpp"

namespace loom::coll {

void directAllGather(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  Exchange exchange(plan);
  for (int peer = 0; peer < plan.nranks; ++peer) {
    if (peer == plan.rank) continue;
    exchange.send(peer, plan.c.send, block);
    exchange.recv(peer, plan.c.recv + static_cast<size_t>(peer) * block, block);
  }
  plan.copy(plan.c.recv + static_cast<size_t>(plan.rank) * block, plan.c.send, block);
  exchange.run();
}

void directAlltoAll(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  Exchange exchange(plan);
  for (int peer = 0; peer < plan.nranks; ++peer) {
    if (peer == plan.rank) continue;
    exchange.send(peer, plan.c.send + static_cast<size_t>(peer) * block, block);
    exchange.recv(peer, plan.c.recv + static_cast<size_t>(peer) * block, block);
  }
  plan.copy(plan.c.recv + static_cast<size_t>(plan.rank) * block, plan.c.send + static_cast<size_t>(plan.rank) * block,
            block);
  exchange.run();
}

void directGather(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  Exchange exchange(plan);
  if (plan.rank != plan.c.root) {
    exchange.send(plan.c.root, plan.c.send, block);
  } else {
    for (int peer = 0; peer < plan.nranks; ++peer) {
      if (peer != plan.rank) exchange.recv(peer, plan.c.recv + static_cast<size_t>(peer) * block, block);
    }
    plan.copy(plan.c.recv + static_cast<size_t>(plan.rank) * block, plan.c.send, block);
  }
  exchange.run();
}

void directScatter(const Plan& plan) {
  const size_t block = plan.c.blockBytes();
  Exchange exchange(plan);
  if (plan.rank != plan.c.root) {
    exchange.recv(plan.c.root, plan.c.recv, block);
  } else {
    for (int peer = 0; peer < plan.nranks; ++peer) {
      if (peer != plan.rank) exchange.send(peer, plan.c.send + static_cast<size_t>(peer) * block, block);
    }
    plan.copy(plan.c.recv, plan.c.send + static_cast<size_t>(plan.rank) * block, block);
  }
  exchange.run();
}

namespace {

// Every peer's message posted at once: one hand-off plus a fraction of one
// per further peer; n-1 of n blocks cross this rank's link.
double directCost(const CostModel& m, size_t bytes) {
  return m.overLinks(1 + CostModel::kPerPeerFraction * (m.n() - 1), (m.n() - 1) / m.n() * static_cast<double>(bytes));
}

// The same for a gather or scatter, whose root's link carries the n-1 blocks
// (`bytes` is one block).
double rootedCost(const CostModel& m, size_t bytes) {
  return m.overLinks(1 + CostModel::kPerPeerFraction * (m.n() - 1), (m.n() - 1) * static_cast<double>(bytes));
}

}  // namespace

extern const AlgorithmEntry kDirectAllGather{
    .name = "direct", .kind = CollectiveKind::AllGather, .run = directAllGather, .costUs = directCost,
    .foldsInRankOrder = true};
extern const AlgorithmEntry kDirectAlltoAll{
    .name = "direct", .kind = CollectiveKind::AlltoAll, .run = directAlltoAll, .costUs = directCost,
    .foldsInRankOrder = true};
extern const AlgorithmEntry kDirectGather{
    .name = "direct", .kind = CollectiveKind::Gather, .run = directGather, .costUs = rootedCost,
    .foldsInRankOrder = true};
extern const AlgorithmEntry kDirectScatter{
    .name = "direct", .kind = CollectiveKind::Scatter, .run = directScatter, .costUs = rootedCost,
    .foldsInRankOrder = true};

}  // namespace loom::coll
