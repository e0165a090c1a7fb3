#include "comm/engine/backoff.hpp"

#include <sched.h>

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

bool oversubscribed(int ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return false;
  return ranks > CPU_COUNT(&set);
}

}  // namespace loom
