#include "base/copy_bytes.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace loom {
namespace {

// Below glibc's rep movsb threshold (2112 bytes on x86-64) its memcpy moves
// vectors itself.
constexpr size_t kStringCopyFrom = 2048;
constexpr uintptr_t kLine = 64;
constexpr uintptr_t kPage = 4096;

#if defined(__x86_64__)
// Unaligned 16-byte loads and stores, a cache line per iteration: SSE2 is in
// every x86-64, and intrinsics keep the compiler from turning the loop back
// into a memcpy call.
void copyByVectors(std::byte* dst, const std::byte* src, size_t bytes) {
  size_t i = 0;
  for (; i + kLine <= bytes; i += kLine) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  if (i < bytes) std::memcpy(dst + i, src + i, bytes - i);
}
#endif

}  // namespace

void copyBytes(std::byte* dst, const std::byte* src, size_t bytes) {
  if (bytes == 0) return;
#if defined(__x86_64__)
  // Slow were distances of 1 to 31 bytes past a page boundary; a cache line's margin.
  const uintptr_t ahead = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) % kPage;
  if (bytes >= kStringCopyFrom && ahead != 0 && ahead < kLine) {
    copyByVectors(dst, src, bytes);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace loom
