#include "comm/progress.hpp"

#include <time.h>

namespace loom {
namespace {

// The coarse monotonic clock (a few ms of resolution, about 5 ns to read
// where the fine one takes 25): progress is reported in milliseconds, and
// it is read twice per collective.
int64_t nowUs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

}  // namespace

void Progress::begin(const char* name, uint32_t sequence) {
  state_.store(0, std::memory_order_relaxed);  // a reader between these stores sees "none yet", not a mix
  name_.store(name, std::memory_order_relaxed);
  sequence_.store(sequence, std::memory_order_relaxed);
  sinceUs_.store(nowUs(), std::memory_order_relaxed);
  state_.store(1, std::memory_order_release);
}

void Progress::end(bool failed) {
  sinceUs_.store(nowUs(), std::memory_order_relaxed);
  state_.store(failed ? 3 : 2, std::memory_order_release);
}

std::string Progress::describe() const {
  const int state = state_.load(std::memory_order_acquire);
  if (state == 0) return "no collective under way";
  const std::string call = std::string(name_.load(std::memory_order_relaxed)) + " #" +
                           std::to_string(sequence_.load(std::memory_order_relaxed));
  const long long ms = (nowUs() - sinceUs_.load(std::memory_order_relaxed)) / 1000;
  switch (state) {
    case 1: return "in " + call + " for " + std::to_string(ms) + " ms";
    case 2: return "idle after " + call + " (done " + std::to_string(ms) + " ms ago)";
    default: return "idle after " + call + " (failed " + std::to_string(ms) + " ms ago)";
  }
}

}  // namespace loom
