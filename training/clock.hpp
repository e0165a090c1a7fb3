// Seconds on the host's monotonic clock, the one every process of a host
// reads alike: what timelines, step reports and the tensor group's waits
// are measured in.
#pragma once

#include <chrono>

namespace loom::train {

inline double monotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace loom::train
