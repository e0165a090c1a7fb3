// The measurements of one rank: for each round of disjoint pairs
// (schedule.hpp), one-way bandwidth in each direction and the 8-byte
// latency with its partner, through loomSend and loomRecv. The rounds are
// separated by out-of-band barriers, so pairs of different rounds never
// overlap.
#pragma once

#include <loom/loom.h>

#include <string>
#include <vector>

#include "tools/loom-diag/options.hpp"
#include "tools/loom-diag/schedule.hpp"

namespace loom::diag {

// This rank's row: what it measured as the sender (bandwidth to each peer),
// with each peer both ways at once (the sum of the two directions), and as
// the lower rank of a pair (latency to it); 0 where it measured nothing.
struct Row {
  std::vector<double> bandwidthGBps;
  std::vector<double> bidirectionalGBps;
  std::vector<double> latencyP50Us;
  std::vector<double> latencyP99Us;
};

// A Loom call that failed: which, and Loom's words (they name the peer).
struct Failure {
  std::string what;
};

// Throws Failure naming `call`, with Loom's words, unless `r` is loomSuccess.
void must(loomResult_t r, const char* call, loomComm_t comm);

// Measures the pairs of `rounds`, one round after another. Throws Failure
// when Loom returns an error. `onRound` is told each round's number as it
// starts (rank 0's progress line).
Row measure(loomComm_t comm, int rank, int size, const std::vector<Round>& rounds, const Options& o,
            void (*onRound)(int round, int rounds));

}  // namespace loom::diag
