// The trainer's one source of randomness: splitmix64, so that every rank
// and every run draws the same numbers from the same seed, on any platform
// (the standard library's distributions are not specified bit for bit).
#pragma once

#include <cmath>
#include <cstdint>

namespace loom::train {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits: exact in float32.
  float uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }
  // Uniform in [-bound, bound).
  float uniform(float bound) { return (2.0f * uniform() - 1.0f) * bound; }
  // Uniform in [0, n).
  uint64_t below(uint64_t n) { return next() % n; }
  // Normal with mean 0 and standard deviation `sd` (Box-Muller, in double).
  float normal(float sd) {
    const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2) * static_cast<double>(sd));
  }

 private:
  uint64_t state_;
};

}  // namespace loom::train
