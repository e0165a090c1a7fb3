// Hierarchical reduce-scatter, for several nodes with the same number L of
// ranks each, the hierarchical all-gather run backwards:
//
//   1. within each node, a reduce-scatter on the node's shared segment in
//      which local rank q owns the blocks of the H ranks with local index q,
//      one per node: it ends with their sums over the node, each at its
//      owner's place in a scratch buffer of the input's size;
//   2. across nodes, a ring reduce-scatter of those H blocks among the ranks
//      with this rank's local index, one per node: each ends with its own
//      block summed over every node.
//
// The node's L rings run at once, so the node's link carries the (H-1) L
// partial blocks the other nodes need, where the flat ring's link between
// two nodes carries n-1. Nodes with unequal rank counts have no ring across
// hosts: there the flat ring does all of it.
#include <limits>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"

namespace loom::coll {

void hierarchicalReduceScatter(const Plan& plan) {
  if (plan.acrossHosts == nullptr || plan.node == nullptr) return ringReduceScatter(plan);
  const size_t block = plan.c.blockBytes();
  const size_t inputBytes = block * static_cast<size_t>(plan.nranks);
  const int hosts = plan.acrossHosts->size();
  std::byte* nodeSums = plan.received->get(inputBytes).data();

  // Local rank q's k-th block is that of the k-th host's q-th rank, at the
  // same place in the input and the scratch.
  const auto& hostRanks = plan.comm.placement().hostRanks;
  const auto place = [&hostRanks, block](int q, int k) {
    return static_cast<size_t>(hostRanks[static_cast<size_t>(k)][static_cast<size_t>(q)]) * block;
  };
  Plan within = plan;
  within.c.recv = nodeSums;
  shmReduceBlocks(within,
                  {.input = plan.c.send, .inputBytes = inputBytes, .perRank = hosts, .inputAt = place, .outputAt = place});

  Plan across = plan;
  across.c.send = nodeSums;
  across.nranks = hosts;
  across.ring = plan.acrossHosts;
  ringReduceScatter(across);
}

namespace {

// The ring across nodes and one pass on the node's segment, which adds
// little to the ring (all-gather: 0.84 of the flat ring's time at 16 KiB,
// 0.53-0.75 at 256 KiB-16 MiB across two namespaces, bench/RESULTS.md).
double cost(const CostModel& m, size_t bytes) {
  if (m.layout.nodes < 2 || m.layout.ranksPerNode < 2) return std::numeric_limits<double>::infinity();
  const double h = m.layout.nodes;
  const double s = static_cast<double>(bytes);
  const Path path = m.path();
  const double segment = CostModel::kSegmentPath.latencyUs + s / (CostModel::kSegmentPath.bandwidthGBps * 1e3);
  return segment + ((h - 1) * path.latencyUs + (h - 1) / h * s / (path.bandwidthGBps * 1e3));
}

}  // namespace

extern const AlgorithmEntry kHierarchicalReduceScatter{
    .name = "hier", .kind = CollectiveKind::ReduceScatter, .run = hierarchicalReduceScatter, .costUs = cost,
    .needs = Needs::UniformNodes};

}  // namespace loom::coll
