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
  Plan within = plan;
  within.c.recv = nodeSums;
  shmReduceBlocks(within, {.input = plan.c.send,
                           .inputBytes = inputBytes,
                           .perRank = hosts,
                           .block = block,
                           .inputByRank = true,
                           .outputByRank = true,
                           .hostRanks = &plan.comm.placement().hostRanks});

  Plan across = plan;
  across.c.send = nodeSums;
  across.nranks = hosts;
  across.ring = plan.acrossHosts;
  ringReduceScatter(across);
}

// One pass on the node's segment and one ring across nodes, as the
// all-gather's, backwards.
extern const AlgorithmEntry kHierarchicalReduceScatter{
    .name = "hier",
    .kind = CollectiveKind::ReduceScatter,
    .run = hierarchicalReduceScatter,
    .costUs = [](const CostModel& m, size_t bytes) {
      return m.acrossUniformNodes(1, CostModel::onSegment(1, static_cast<double>(bytes)), bytes);
    },
    .needs = Needs::UniformNodes};

}  // namespace loom::coll
