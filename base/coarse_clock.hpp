// The wall clock to the kernel's tick (a few milliseconds), for the records
// every collective keeps of when it began and ended (the flight recorder,
// the progress a peer's survey reads): about 10 instructions where the
// precise clock takes some 50, read once at a call's start and once at its
// end for both records. Wall time, so that ranks' records compare across
// hosts; a record of where ranks stopped needs milliseconds, not microseconds.
#pragma once

#include <time.h>

#include <chrono>

namespace loom {

inline std::chrono::system_clock::time_point coarseNow() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &t);
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec)));
}

// Microseconds since the epoch, as the records keep and report them.
inline long long microsSinceEpoch(std::chrono::system_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::microseconds>(at.time_since_epoch()).count();
}

}  // namespace loom
