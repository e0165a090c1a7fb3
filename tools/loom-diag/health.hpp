// Collective health: all-reduce and all-gather busbw (nccl-tests' bus
// bandwidth: all-reduce 2(n-1)/n of the algorithm bandwidth, all-gather
// (n-1)/n) for the whole job, within each node (its ranks, on a split
// communicator) and across nodes (one rank per node), beside this host's
// memcpy bandwidth measured on the spot: the limit shared memory moves at.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <string>
#include <vector>

namespace loom::diag {

enum class Scope { Job, Node, AcrossNodes };

struct HealthResult {
  std::string scope;       // "job", "node <lowest rank>", "across nodes"
  Scope kind = Scope::Job;
  int node = -1;           // Node: the lowest rank of the node (its host key)
  std::string collective;  // "all_reduce", "all_gather"
  size_t bytes = 0;        // per rank (all-gather: each rank's block)
  int ranks = 0;
  double busbwGBps = 0;
};

// A raw TCP stream between the first two nodes (tcp_stream.hpp): the limit
// of the socket paths between them.
struct TcpStream {
  int from = -1;  // -1: not measured (one node)
  int to = -1;
  size_t bytes = 0;
  double GBps = 0;
};

struct Health {
  std::vector<HealthResult> collectives;
  TcpStream tcp;
};

// Every rank calls it; rank 0 gets every scope's results, the others
// nothing. `hostKey`: the lowest rank of this rank's host. With two or more
// nodes, rank 0 and the lowest rank of another node also measure a raw TCP
// stream of `sizes.back()` bytes. Throws Failure.
Health measureHealth(loomComm_t comm, int rank, int size, int hostKey, const std::vector<size_t>& sizes, int iters);

// One thread's memcpy of 64 MiB buffers, GB/s (best of three).
double memcpyGBps();

}  // namespace loom::diag
