#include "comm/progress.hpp"

#include "base/coarse_clock.hpp"

namespace loom {

void Progress::begin(const char* name, uint32_t sequence, uint32_t call, uint64_t bytes,
                     std::chrono::system_clock::time_point at) {
  // A seqlock: readers retry while version_ is odd or changed under them.
  const uint32_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  state_.store(0, std::memory_order_relaxed);  // a reader between these stores sees "none yet", not a mix
  previousSequence_.store(sequence_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  previousCall_.store(call_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  previousBytes_.store(bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  previousSentMask_.store(sentMask_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  name_.store(name, std::memory_order_relaxed);
  sequence_.store(sequence, std::memory_order_relaxed);
  call_.store(call, std::memory_order_relaxed);
  bytes_.store(bytes, std::memory_order_relaxed);
  sentMask_.store(0, std::memory_order_relaxed);
  sinceUs_.store(microsSinceEpoch(at), std::memory_order_relaxed);
  state_.store(1, std::memory_order_relaxed);
  version_.store(v + 2, std::memory_order_release);
}

void Progress::end(Outcome outcome, std::chrono::system_clock::time_point at) {
  sinceUs_.store(microsSinceEpoch(at), std::memory_order_relaxed);
  state_.store(outcome == Outcome::Failed ? 3 : 2, std::memory_order_release);
}

Progress::Snapshot Progress::snapshot() const {
  Snapshot s;
  for (;;) {
    const uint32_t v = version_.load(std::memory_order_acquire);
    s.state = static_cast<State>(state_.load(std::memory_order_acquire));
    s.current = {sequence_.load(std::memory_order_relaxed), call_.load(std::memory_order_relaxed),
                 bytes_.load(std::memory_order_relaxed), sentMask_.load(std::memory_order_relaxed)};
    s.previous = {previousSequence_.load(std::memory_order_relaxed), previousCall_.load(std::memory_order_relaxed),
                  previousBytes_.load(std::memory_order_relaxed),
                  previousSentMask_.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((v & 1) == 0 && version_.load(std::memory_order_relaxed) == v) return s;
  }
}

std::string Progress::describe() const {
  const int state = state_.load(std::memory_order_acquire);
  if (state == 0) return "no collective under way";
  const std::string call = std::string(name_.load(std::memory_order_relaxed)) + " #" +
                           std::to_string(sequence_.load(std::memory_order_relaxed));
  const long long ms = (microsSinceEpoch(coarseNow()) - sinceUs_.load(std::memory_order_relaxed)) / 1000;
  switch (state) {
    case 1: return "in " + call + " for " + std::to_string(ms) + " ms";
    case 2: return "idle after " + call + " (done " + std::to_string(ms) + " ms ago)";
    default: return "idle after " + call + " (failed " + std::to_string(ms) + " ms ago)";
  }
}

}  // namespace loom
