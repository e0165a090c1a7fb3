// What a Plan does itself, beyond handing its calls to the executor.
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"

namespace loom::coll {

void Plan::copyToBoth(std::byte* dst, std::byte* also, const std::byte* src, size_t bytes) const {
  // A device's copies go whole: small runs would each be a launch.
  if (!executor.isHost()) {
    executor.copy(dst, src, bytes);
    executor.copy(also, src, bytes);
    return;
  }
  // Runs of 8 KiB: the L1 holds the run the second copy reads (2 KiB runs
  // cost more in calls than they saved).
  constexpr size_t kRun = 8192;
  for (size_t at = 0; at < bytes; at += kRun) {
    const size_t run = std::min(kRun, bytes - at);
    executor.copy(dst + at, src + at, run);
    executor.copy(also + at, src + at, run);
  }
}

}  // namespace loom::coll
