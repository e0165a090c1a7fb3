// The health check, and what the collective figures say of the nodes.
//
// Floors (Azure's HPC health checks keep one per machine type): every pair
// at least --expect-pair-bw GB/s one way, every pair's 8-byte p50 latency at
// most --expect-latency µs, every collective scope's busbw at the largest
// size measured at least --expect-busbw GB/s. Each figure that misses its
// floor is a finding of kind "floor", naming the ranks (and so the hosts)
// involved; the exit status is then 1, so a Slurm prolog or a node health
// checker can drain what it names. A thresholds file (--thresholds FILE)
// holds the same settings, one `name value` per line, for one machine type.
//
// Nodes: with three or more nodes of two or more ranks, a node whose own
// all-reduce or all-gather busbw (its ranks on a communicator of their own)
// falls more than --min-drop below the median of the nodes at the largest
// size is a slow node (kind "node", metric busbw), unless the pair matrix
// already named it: its shared memory, or its CPUs, are the fault.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tools/loom-diag/attribution.hpp"
#include "tools/loom-diag/health.hpp"

namespace loom::diag {

struct Expectations {
  double pairGBps = 0;   // --expect-pair-bw (0: no floor)
  double busbwGBps = 0;  // --expect-busbw
  double latencyUs = 0;  // --expect-latency
};

// The floors `pairs` and `health` miss.
std::vector<Finding> floorFindings(std::span<const PairResult> pairs, std::span<const HealthResult> health,
                                   std::span<const int> hostOf, const Expectations& expect);

// Slow nodes by their collective figures; `named`: the findings so far
// (a node they name already is not named again).
std::vector<Finding> collectiveFindings(std::span<const HealthResult> health, std::span<const int> hostOf,
                                        const Thresholds& thresholds, std::span<const Finding> named);

}  // namespace loom::diag
