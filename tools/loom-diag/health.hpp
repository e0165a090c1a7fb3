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

struct HealthResult {
  std::string scope;       // "job", "node <lowest rank>", "across nodes"
  std::string collective;  // "all_reduce", "all_gather"
  size_t bytes = 0;        // per rank (all-gather: each rank's block)
  int ranks = 0;
  double busbwGBps = 0;
};

// Every rank calls it; rank 0 gets every scope's results, the others
// nothing. `hostKey`: the lowest rank of this rank's host. Throws Failure.
std::vector<HealthResult> measureHealth(loomComm_t comm, int rank, int size, int hostKey,
                                        const std::vector<size_t>& sizes, int iters);

// One thread's memcpy of 64 MiB buffers, GB/s (best of three).
double memcpyGBps();

}  // namespace loom::diag
