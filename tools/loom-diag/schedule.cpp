#include "tools/loom-diag/schedule.hpp"

#include <algorithm>

namespace loom::diag {

std::vector<Round> roundRobin(int n) {
  if (n < 2) return {};
  const int slots = n % 2 == 0 ? n : n + 1;  // slot n is a rest for odd n
  std::vector<int> order(static_cast<size_t>(slots));
  for (int i = 0; i < slots; ++i) order[static_cast<size_t>(i)] = i;
  std::vector<Round> rounds;
  for (int r = 0; r < slots - 1; ++r) {
    Round round;
    for (int i = 0; i < slots / 2; ++i) {
      const int a = order[static_cast<size_t>(i)];
      const int b = order[static_cast<size_t>(slots - 1 - i)];
      if (a < n && b < n) round.emplace_back(std::min(a, b), std::max(a, b));
    }
    rounds.push_back(std::move(round));
    // The last slot stays; the others turn one place.
    std::rotate(order.begin(), order.end() - 2, order.end() - 1);
  }
  return rounds;
}

int partnerIn(const Round& round, int rank) {
  for (const auto& [a, b] : round) {
    if (a == rank) return b;
    if (b == rank) return a;
  }
  return -1;
}

}  // namespace loom::diag
