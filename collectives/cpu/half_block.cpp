#include "collectives/cpu/half_block.hpp"

#include <cstdint>
#include <cstring>

#include "base/half.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define LOOM_HAVE_F16C_PATH 1
#endif

namespace loom::cpu {
namespace {

void halfToFloatScalar(const std::byte* src, float* dst, size_t from, size_t n) {
  for (size_t i = from; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, src + 2 * i, 2);
    dst[i] = halfToFloat(v);
  }
}

void floatToHalfScalar(const float* src, std::byte* dst, size_t from, size_t n) {
  for (size_t i = from; i < n; ++i) {
    uint16_t v = floatToHalf(src[i]);
    std::memcpy(dst + 2 * i, &v, 2);
  }
}

#ifdef LOOM_HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) void halfToFloatF16c(const std::byte* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  halfToFloatScalar(src, dst, i, n);
}

__attribute__((target("avx,f16c"))) void floatToHalfF16c(const float* src, std::byte* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
  floatToHalfScalar(src, dst, i, n);
}

// F16C from CPUID itself: not every compiler's __builtin_cpu_supports knows
// the name. "avx" also checks that the OS saves the YMM registers.
bool haveF16c() {
  static const bool have = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0 && __builtin_cpu_supports("avx");
  }();
  return have;
}
#endif

}  // namespace

void halfToFloatBlock(const std::byte* src, float* dst, size_t n) {
#ifdef LOOM_HAVE_F16C_PATH
  if (haveF16c()) return halfToFloatF16c(src, dst, n);
#endif
  halfToFloatScalar(src, dst, 0, n);
}

void floatToHalfBlock(const float* src, std::byte* dst, size_t n) {
#ifdef LOOM_HAVE_F16C_PATH
  if (haveF16c()) return floatToHalfF16c(src, dst, n);
#endif
  floatToHalfScalar(src, dst, 0, n);
}

}  // namespace loom::cpu
