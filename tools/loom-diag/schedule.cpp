#include "tools/loom-diag/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

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

std::vector<Round> sampledRounds(int n, int extra, unsigned seed) {
  if (n < 2) return {};
  // Shift k and n - k give the same pairs: keep k <= n / 2.
  std::set<int> shifts;
  for (int k = 1; k < n; k *= 2) shifts.insert(std::min(k, n - k));
  std::mt19937 random(seed);
  for (int tries = 0; static_cast<int>(shifts.size()) < static_cast<int>(std::log2(n)) + 1 + extra && tries < 64 * (extra + 1);
       ++tries) {
    const int k = std::uniform_int_distribution<int>(1, n - 1)(random);
    shifts.insert(std::min(k, n - k));
  }
  std::vector<Round> rounds;
  for (int k : shifts) {
    // The shift's pairs form cycles; dealt greedily, they fill at most three rounds.
    std::vector<Round> mine;
    std::vector<std::vector<bool>> busy;
    for (int i = 0; i < n; ++i) {
      const int j = (i + k) % n;
      const Pair pair{std::min(i, j), std::max(i, j)};
      if (2 * k == n && i >= k) continue;  // the same pairs again
      size_t r = 0;
      while (r < mine.size() && (busy[r][static_cast<size_t>(pair.first)] || busy[r][static_cast<size_t>(pair.second)])) ++r;
      if (r == mine.size()) {
        mine.emplace_back();
        busy.emplace_back(static_cast<size_t>(n), false);
      }
      mine[r].push_back(pair);
      busy[r][static_cast<size_t>(pair.first)] = busy[r][static_cast<size_t>(pair.second)] = true;
    }
    rounds.insert(rounds.end(), mine.begin(), mine.end());
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
