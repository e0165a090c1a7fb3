#include "training/data/shuffle.hpp"

#include <stdexcept>
#include <string>

namespace loom::train {
namespace {

constexpr int kRounds = 4;

uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Shuffle::Shuffle(uint64_t n, uint64_t key) : n_(n), key_(mix(key + 0x9E3779B97F4A7C15ull)), half_(0) {
  if (n == 0) throw std::invalid_argument("a shuffle of nothing");
  while (half_ < 32 && (uint64_t{1} << (2 * half_)) < n) ++half_;
  mask_ = (uint64_t{1} << half_) - 1;
}

uint64_t Shuffle::once(uint64_t x) const {
  uint64_t left = x >> half_, right = x & mask_;
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t f = mix(key_ ^ (static_cast<uint64_t>(round) << 56) ^ right) & mask_;
    const uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_) | right;
}

uint64_t Shuffle::operator()(uint64_t i, uint64_t* passes) const {
  if (i >= n_) throw std::out_of_range("shuffle: index " + std::to_string(i) + " of " + std::to_string(n_));
  uint64_t x = i;
  do {
    x = once(x);
    if (passes != nullptr) ++*passes;
  } while (x >= n_);
  return x;
}

}  // namespace loom::train
