// Test data that every rank can compute: byte i of the buffer `seed` names
// is a hash of (seed, i), so a misplaced, lost or repeated chunk shows up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace loom::test {

void fillPattern(std::span<std::byte> buffer, uint64_t seed);
// Index of the first byte that differs from the pattern, or -1.
long long firstMismatch(std::span<const std::byte> buffer, uint64_t seed);

// A seed for the message `index` from rank `from` to rank `to`.
inline uint64_t messageSeed(int from, int to, uint64_t index) {
  return (uint64_t(from) << 48) ^ (uint64_t(to) << 32) ^ index;
}

}  // namespace loom::test
