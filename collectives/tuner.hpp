// Picks each collective's algorithm and chunk size from a cost model,
//
//   time = steps x latency + bytes moved per rank / bandwidth,
//
// with the latency and bandwidth of the path the algorithm crosses (one
// table, kPaths in tuner.cpp: shared memory within a node, sockets across
// nodes). LOOM_ALGO and LOOM_CHUNKSIZE override it. Every rank computes the
// same choice from the same inputs (collective, bytes, rank layout), which is
// what keeps them in step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "collectives/collective.hpp"

namespace loom::coll {

enum class Algorithm {
  Ring,               // ring reduce-scatter + all-gather; chains for broadcast and reduce
  RecursiveDoubling,  // log2(n) pairwise exchanges, for small all-reduces
  Direct,             // every rank to every rank (or to/from the root) at once; reductions in rank order
  Shm,                // one node's ranks on a shared segment, no point-to-point
  Tree,               // double binary trees, for medium all-reduces on many ranks
  Hierarchical,       // shared segment within each node, a ring across nodes
};
constexpr int kAlgorithms = 6;

const char* algorithmName(Algorithm algorithm);
bool applies(Algorithm algorithm, CollectiveKind kind);
// True if the algorithm folds every element's operands in rank order, one
// pass (what LOOM_DETERMINISTIC keeps to for reductions).
bool foldsInRankOrder(Algorithm algorithm);

struct Layout {
  int nranks = 1;
  int nodes = 1;              // distinct hosts among the ranks
  bool sharedMemory = false;  // one node, and LOOM_TRANSPORT does not rule shared memory out
  int ranksPerNode = 0;       // ranks on each node if all have as many and may share memory, else 0
};

struct Choice {
  Algorithm algorithm = Algorithm::Ring;
  size_t chunkBytes = 0;  // ring slice per loop, or shm slot; a multiple of 64
};

// What LOOM_ALGO and LOOM_CHUNKSIZE ask for; parsed once per communicator.
struct Overrides {
  std::array<std::optional<Algorithm>, kCollectiveKinds> algorithm{};
  size_t chunkBytes = 0;  // 0: the tuner's
  bool deterministic = false;  // reductions only with algorithms that fold in rank order
  const char* deterministicBy = "LOOM_DETERMINISTIC=1";  // who asked, for messages

  // Throws loomInvalidArgument naming the variable and the bad entry.
  static Overrides fromEnv();
};

class Tuner {
 public:
  Tuner(Layout layout, Overrides overrides);

  // Throws loomInvalidArgument if LOOM_ALGO forces an algorithm that the
  // layout cannot run (shm across nodes), or, under LOOM_DETERMINISTIC, a
  // reduction algorithm that does not fold in rank order. Not thread-safe:
  // a communicator's collectives call it one at a time (CommState::runMutex).
  Choice choose(CollectiveKind kind, size_t bytes);
  // The node segment's slot: kDefaultSlot, or LOOM_CHUNKSIZE within its cap.
  size_t segmentSlotBytes() const;
  // The model's estimate in microseconds, for the tests and the log.
  double estimateUs(Algorithm algorithm, CollectiveKind kind, size_t bytes) const;

 private:
  Layout layout_;
  Overrides overrides_;
  // The model's choice, logged once per (collective, size class).
  Choice decide(CollectiveKind kind, size_t bytes);

  // The last choice per collective: loops call one size over and over, and
  // the model costs as much as a small collective's synchronization.
  struct Last {
    size_t bytes = SIZE_MAX;
    Choice choice;
  };
  std::array<Last, kCollectiveKinds> last_{};
  std::set<std::pair<int, int>> logged_;  // (collective, log2 size) already logged
};

}  // namespace loom::coll
