#include "base/deadline.hpp"

#include <algorithm>
#include <climits>

namespace loom {

int Deadline::pollTimeoutMs() const {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(at_ - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

Deadline Deadline::capped(std::chrono::milliseconds cap) const {
  auto limit = Clock::now() + cap;
  return Deadline(std::min(at_, limit));
}

}  // namespace loom
