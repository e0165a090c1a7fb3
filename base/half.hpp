// float16 (IEEE binary16) and bfloat16 to and from float32. Reductions of
// 16-bit types accumulate in float32 and round once, to nearest even, with
// these. Branch-light so that the reduction loops vectorize around them.
// The CUDA kernels (collectives/cuda) call the very same functions, so that a
// device reduction rounds exactly as the host's does.
#pragma once

#include <bit>
#include <cstdint>

#include "base/host_device.hpp"

namespace loom::cpu {

LOOM_HOST_DEVICE inline float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  // Normal: rebias the exponent (15 -> 127). Subnormal: mantissa x 2^-24,
  // computed from an integer so that no float subnormal (and its slow
  // microcode path) is ever touched. Infinity and NaN keep their payload.
  const uint32_t normal = (magnitude << 13) + (uint32_t(127 - 15) << 23);
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-24f);
  uint32_t bits = magnitude < 0x400u ? subnormal : normal;
  bits = magnitude >= 0x7c00u ? (magnitude << 13) | 0x7f800000u : bits;
  return std::bit_cast<float>(bits | sign);
}

// Selects instead of branches, so that loops around it vectorize.
LOOM_HOST_DEVICE inline uint16_t floatToHalf(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  const uint32_t normal = (x + (uint32_t(15 - 127) << 23) + 0xfffu + ((x >> 13) & 1u)) >> 13;
  // Below the smallest normal half (2^-14): adding 0.5 puts the half's subnormal
  // ulp (2^-24) at the float's last bit, so the FPU rounds to nearest even.
  const uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(x) + 0.5f) - 0x3f000000u;
  uint32_t r = x < 0x38800000u ? subnormal : normal;
  r = x >= 0x477ff000u ? 0x7c00u : r;  // >= 65520 (and infinity) rounds to infinity
  r = x > 0x7f800000u ? 0x7e00u : r;   // NaN stays NaN (quiet)
  return static_cast<uint16_t>(sign | r);
}

LOOM_HOST_DEVICE inline float bfloat16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

LOOM_HOST_DEVICE inline uint16_t floatToBfloat16(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even; overflow carries into infinity
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace loom::cpu
