// e^x in float32 as straight-line arithmetic, so that GCC vectorizes the
// loops that call it (glibc's expf is a call per element, and was a tenth
// of a tiny GPT's step through GELU and the softmaxes). Cody and Waite's
// reduction, x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 split in two parts
// so that n ln 2 is exact), e^r by Cephes' degree-6 minimax polynomial for
// expf, and 2^n put into the exponent's bits: within 2 ulp of e^x for x in
// [-87, 88]; x is clamped there (e^-87 is near the smallest normal float).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace loom::train {

inline float expFloat(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // n = round(x / ln 2), by the 1.5 x 2^23 trick (no rounding instruction needed).
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const auto scale = std::bit_cast<float>(static_cast<int32_t>((static_cast<int32_t>(n) + 127) << 23));
  return er * scale;
}

}  // namespace loom::train
