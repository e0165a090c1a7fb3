#include "base/backoff.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace loom {
namespace {

thread_local std::chrono::nanoseconds tSpin = Backoff::kSpin;

}  // namespace

Backoff::Phase Backoff::next() {
  if (idle_ && phase_ == Phase::Spin && ++turns_ % kTurnsPerClock != 0) return Phase::Spin;
  auto now = std::chrono::steady_clock::now();
  if (!idle_) {
    idle_ = true;
    since_ = now;
  }
  auto idle = now - since_;
  if (spin_ && idle < tSpin) phase_ = Phase::Spin;
  else if (idle < kYield) phase_ = Phase::Yield;
  else phase_ = Phase::Sleep;
  return phase_;
}

std::chrono::nanoseconds Backoff::threadSpin() { return tSpin; }

std::chrono::nanoseconds Backoff::learnt(std::chrono::nanoseconds spin, Phase phase, bool gaveAway) {
  using std::chrono::nanoseconds;
  constexpr nanoseconds kLeast{250};  // below it, no spin at all
  if (phase == Phase::Sleep) return spin;  // a long wait says nothing of where the peer runs
  if (phase == Phase::Yield && gaveAway) return spin / 2 < kLeast ? nanoseconds(0) : spin / 2;
  return std::min<nanoseconds>(kSpin, std::max(spin * 2, kLeast));
}

void Backoff::learn() {
  if (spin_ && idle_) tSpin = learnt(tSpin, phase_, gaveAway_);
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

void pollUntil(const std::function<bool()>& done, const std::function<void()>& check) {
  Backoff backoff;
  while (!done()) {
    backoff.idle(
        [&](Backoff::Phase) {
          if (check) check();
        },
        [](std::chrono::microseconds d) { std::this_thread::sleep_for(d); });
  }
}

}  // namespace loom
