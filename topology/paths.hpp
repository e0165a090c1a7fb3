// The path between two nodes of one machine, in NCCL's vocabulary, nearest
// first:
//   LOC  the same node
//   NVL  one NVLink hop, or two through an NVSwitch
//   NVB  NVLink through another GPU
//   PIX  PCIe through one switch
//   PXB  PCIe through several switches, not through the CPU
//   PHB  PCIe through the CPU's host bridge (same NUMA node)
//   SYS  across the link between NUMA nodes or sockets
//   NET  across the network (another machine)
#pragma once

#include <string_view>

#include "topology/system.hpp"

namespace loom::topo {

enum class PathType { LOC, NVL, NVB, PIX, PXB, PHB, SYS, NET };

std::string_view pathName(PathType type);

struct Path {
  PathType type = PathType::LOC;
  double GBs = 0;        // the narrowest link crossed, one direction; 0 for LOC
  double latencyUs = 0;  // the links' latencies added up (LinkModel)
};

// Between nodes `a` and `b` of `sys` (indexes into sys.nodes).
Path pathBetween(const System& sys, int a, int b);

}  // namespace loom::topo
