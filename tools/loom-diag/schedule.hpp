// Which pairs of ranks loom-diag measures at once. A round is a set of
// disjoint pairs, so every rank talks to at most one peer in it and the
// pairs of a round do not compete for a rank; all pairs are covered in
// O(n) rounds by the circle method of round-robin tournaments: rank n-1
// (or an idle slot, for odd n) stays put while the others rotate, and
// position i meets position n-1-i.
#pragma once

#include <utility>
#include <vector>

namespace loom::diag {

using Pair = std::pair<int, int>;  // (lower rank, higher rank)
using Round = std::vector<Pair>;

// Every unordered pair of n ranks exactly once: n-1 rounds for even n, n
// for odd (one rank rests in each).
std::vector<Round> roundRobin(int n);

// A schedule linear in n for jobs too large for every pair: the pairs
// (i, i + k mod n) for the shifts k = 1, 2, 4, ... below n and `extra` more
// drawn from `seed`, each shift's pairs dealt into at most three rounds of
// disjoint pairs. Every rank meets 2 peers per shift, most of them on other
// nodes when a node's ranks are consecutive; O(log n + extra) rounds.
std::vector<Round> sampledRounds(int n, int extra, unsigned seed);

// The peer of `rank` in `round`, or -1 if it rests.
int partnerIn(const Round& round, int rank);

}  // namespace loom::diag
