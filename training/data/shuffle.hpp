// A seeded permutation of [0, n) that maps one index at a time, so that a
// step's batch costs O(batch) however large the dataset, and no rank ever
// builds an O(n) permutation: a four-round Feistel network (Luby and
// Rackoff) over the smallest domain of 4^h >= n values, each round's
// function splitmix64 of the key, the round and the half, and "cycle
// walking" back into [0, n) (Black and Rogaway, "Ciphers with Arbitrary
// Finite Domains", 2002): a value that lands at n or above is mapped again
// until it lands inside, which keeps the map a bijection and takes fewer
// than 4 tries on average (the domain is under 4n).
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::train {

class Shuffle {
 public:
  Shuffle(uint64_t n, uint64_t key);
  // Where index i (< n) goes; adds the Feistel passes it took to *passes when given.
  uint64_t operator()(uint64_t i, uint64_t* passes = nullptr) const;

 private:
  uint64_t once(uint64_t x) const;
  uint64_t n_;
  uint64_t key_;
  unsigned half_;  // bits in each half of the domain
  uint64_t mask_;  // (1 << half_) - 1
};

}  // namespace loom::train
