// A point in time after which a wait gives up. Every blocking call in Loom
// takes one, so that nothing can wait forever.
#pragma once

#include <chrono>

namespace loom {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(std::chrono::milliseconds timeout) { return Deadline(Clock::now() + timeout); }

  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, rounded up and clamped for poll(): never negative.
  int pollTimeoutMs() const;
  // The earlier of this deadline and one `cap` from now.
  Deadline capped(std::chrono::milliseconds cap) const;
  Clock::time_point at() const { return at_; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

}  // namespace loom
