// Picks each collective's algorithm and chunk size: the registry's entry
// for the collective with the lowest estimate (cost_model.hpp), unless
// LOOM_ALGO names one; LOOM_CHUNKSIZE overrides the chunk. Every rank
// computes the same choice from the same inputs (collective, bytes, rank
// layout), which is what keeps them in step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "collectives/algorithms/registry.hpp"
#include "collectives/collective.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/executor.hpp"

namespace loom::coll {

struct Choice {
  const AlgorithmEntry* algorithm = nullptr;
  size_t chunkBytes = 0;  // ring slice per loop, or shm slot; a multiple of 64
};

// What LOOM_ALGO and LOOM_CHUNKSIZE ask for; parsed once per communicator.
struct Overrides {
  std::array<const AlgorithmEntry*, kCollectiveKinds> algorithm{};  // null: the tuner's
  size_t chunkBytes = 0;  // 0: the tuner's
  bool deterministic = false;  // reductions only with algorithms that fold in rank order
  const char* deterministicBy = "LOOM_DETERMINISTIC=1";  // who asked, for messages

  // Throws loomInvalidArgument naming the variable and the bad entry.
  static Overrides fromEnv();
};

class Tuner {
 public:
  Tuner(Layout layout, Overrides overrides);

  // The choice for a collective that `executor` runs: only entries it can
  // run (hostOnly ones on the host's). Throws loomInvalidArgument if
  // LOOM_ALGO forces an algorithm that the layout or the executor cannot run
  // (shm across nodes), or, under LOOM_DETERMINISTIC, a reduction algorithm
  // that does not fold in rank order. Not thread-safe: a communicator's
  // collectives call it one at a time (CommState::runLock).
  Choice choose(CollectiveKind kind, size_t bytes, const Executor& executor);
  // The node segment's slot: kDefaultSlot, or LOOM_CHUNKSIZE within its cap.
  size_t segmentSlotBytes() const;
  // The model's estimate in microseconds, for the tests and the log.
  double estimateUs(const AlgorithmEntry& algorithm, size_t bytes) const;

 private:
  CostModel model_;
  Overrides overrides_;
  // The model's choice, logged once per (collective, size class).
  Choice decide(CollectiveKind kind, size_t bytes, const Executor& executor);

  // The last choice per collective: loops call one size over and over, and
  // the model costs as much as a small collective's synchronization.
  struct Last {
    size_t bytes = SIZE_MAX;
    const Executor* executor = nullptr;
    Choice choice;
  };
  std::array<Last, kCollectiveKinds> last_{};
  std::set<std::pair<int, int>> logged_;  // (collective, log2 size) already logged
};

}  // namespace loom::coll
