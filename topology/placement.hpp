// Rank placement: where each rank of a communicator runs (host, NUMA node,
// GPU), and what follows from it: the ring order, the double binary trees
// across hosts, and each rank's NIC. Every function is a pure function of
// its inputs, so ranks that allgathered the same places compute the same plan.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "topology/system.hpp"

namespace loom::topo {

struct RankPlace {
  int rank = -1;
  uint64_t host = 0;
  int numa = -1;     // NUMA os index on its host
  int package = -1;  // socket on its host
  int gpu = -1;      // GPU index on its host, -1 without
  int nic = -1;      // NIC index on its host, -1 without (see chooseNics)
  std::string nicName;
};

// Where the rank with this local rank runs when nothing pins it: on its GPU
// (local rank i uses GPU i mod the GPU count) when the machine has GPUs, else
// on the NUMA nodes in blocks, as launchers bind ranks.
RankPlace placeByLocalRank(const System& sys, int localRank, int localSize);

// The same for this process on this machine: on the GPU with PCI bus id
// `gpuBusId` (its CUDA device) when the machine has it; else a process whose
// CPU affinity lies inside one NUMA node runs there; else placeByLocalRank.
RankPlace placeThisProcess(const System& sys, int localRank, int localSize, const std::string& gpuBusId = "");

// Where Loom's own threads for a rank placed at `place` run (its listener,
// which creates the rank's receive FIFOs): the processing units of its NUMA
// node that `allowed` (the process's affinity) contains, so the segments
// those threads populate sit beside the rank. Empty, meaning "do not bind",
// when `sys` is not this machine, the place has no NUMA node, or none of its
// units is allowed.
std::vector<int> cpusFor(const System& sys, const RankPlace& place, std::span<const int> allowed);

// Gives each of one host's ranks (`local`, in rank order) the NIC nearest to
// its GPU, or to its NUMA node without one: nearest by path type, then by
// bandwidth; ties go to the NIC with the fewest ranks so far, so ranks spread
// over equally near NICs.
void chooseNics(const System& sys, std::span<RankPlace> local);

// A binary tree over `n` nodes; parent -1 at the root.
struct Tree {
  int root = -1;
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
};

// Two binary trees over n nodes in which (for even n) every node that is
// inner in one is a leaf in the other, so reductions can use both at full
// bandwidth (Sanders, Speck and Träff's two-tree algorithms; NCCL's double
// binary tree). Tree 0 is the in-order tree, tree 1 its mirror for even n,
// its shift by one for odd n.
std::array<Tree, 2> doubleBinaryTrees(int n);

struct Placement {
  std::vector<RankPlace> ranks;            // by rank
  std::vector<uint64_t> hosts;             // in order of their first rank
  std::vector<std::vector<int>> hostRanks; // ranks on each host, ascending
  std::vector<int> ring;                   // ranks in ring order
  std::array<Tree, 2> trees;               // over hosts (indexes into `hosts`)
};

// The ring keeps each host's ranks together, hosts in order of their first
// rank, and inside a host goes socket by socket, NUMA node by NUMA node, GPU
// by GPU, so it crosses a socket link once per socket boundary and the
// network once per host. `places` is indexed by rank.
Placement plan(std::vector<RankPlace> places);

// The plan for `nodes` machines like `sys` with `ranksPerNode` ranks each,
// ranks numbered node by node, each placed by placeByLocalRank: what
// loom-topo --nodes --ranks-per-node shows.
Placement planLayout(const System& sys, int nodes, int ranksPerNode);

}  // namespace loom::topo
