#include "comm/engine/backoff.hpp"

namespace loom {

Backoff::Phase Backoff::next() {
  auto now = std::chrono::steady_clock::now();
  if (!idle_) {
    idle_ = true;
    since_ = now;
  }
  auto idle = now - since_;
  if (idle < kSpin) return Phase::Spin;
  if (idle < kYield) return Phase::Yield;
  return Phase::Sleep;
}

}  // namespace loom
