#include "base/backoff.hpp"

#include <sched.h>

#include <algorithm>

namespace loom {

Backoff::Phase Backoff::next() {
  auto now = std::chrono::steady_clock::now();
  if (!idle_) {
    idle_ = true;
    since_ = now;
  }
  auto idle = now - since_;
  if (spin_ && idle < kSpin) return Phase::Spin;
  if (idle < kYield) return Phase::Yield;
  return Phase::Sleep;
}

std::chrono::microseconds Backoff::sleepTime() {
  const auto now = sleep_;
  sleep_ = std::min(sleep_ * 2, kSleep);
  return now;
}

timespec toTimespec(std::chrono::microseconds d) {
  return {.tv_sec = static_cast<time_t>(d.count() / 1000000), .tv_nsec = static_cast<long>(d.count() % 1000000 * 1000)};
}

bool oversubscribed(int ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return false;
  return ranks > CPU_COUNT(&set);
}

}  // namespace loom
