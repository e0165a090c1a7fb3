#include "tests/support/pattern.hpp"

#include <cstring>

namespace loom::test {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t word(uint64_t seed, size_t index) { return mix(seed * 0x100000001b3ull + index); }

}  // namespace

void fillPattern(std::span<std::byte> buffer, uint64_t seed) {
  size_t i = 0;
  for (; i + 8 <= buffer.size(); i += 8) {
    uint64_t w = word(seed, i / 8);
    std::memcpy(buffer.data() + i, &w, 8);
  }
  if (i < buffer.size()) {
    uint64_t w = word(seed, i / 8);
    std::memcpy(buffer.data() + i, &w, buffer.size() - i);
  }
}

long long firstMismatch(std::span<const std::byte> buffer, uint64_t seed) {
  for (size_t i = 0; i < buffer.size(); i += 8) {
    uint64_t w = word(seed, i / 8);
    size_t n = std::min<size_t>(8, buffer.size() - i);
    if (std::memcmp(buffer.data() + i, &w, n) != 0) {
      const auto* expected = reinterpret_cast<const std::byte*>(&w);
      for (size_t j = 0; j < n; ++j) {
        if (buffer[i + j] != expected[j]) return static_cast<long long>(i + j);
      }
    }
  }
  return -1;
}

}  // namespace loom::test
