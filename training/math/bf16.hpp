// bfloat16 for the mixed-precision mode: the upper 16 bits of a float32,
// rounded to nearest even (a NaN stays a NaN), stored as loom::bfloat16 so
// that Loom reduces it as bf16 (accumulating in float32, rounding once).
// The model's parameters and gradients are kept in it; layers compute in
// float32 on a widened copy of one layer at a time (model.hpp).
#pragma once

#include <loom/loom.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace loom::train {

using bf16 = loom::bfloat16;

inline float widen(bf16 v) {
  const uint32_t bits = static_cast<uint32_t>(v.bits) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

inline bf16 narrow(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((bits >> 16) | 0x40u)};  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even
  return bf16{static_cast<uint16_t>(bits >> 16)};
}

// Code written for either precision of parameters (float or bf16) reads
// and writes them as float32 through these.
inline float toFloat(float v) { return v; }
inline float toFloat(bf16 v) { return widen(v); }
template <class T>
T fromFloat(float v) {
  if constexpr (std::is_same_v<T, bf16>) return narrow(v);
  else return v;
}

// to[i] = widen(from[i]); narrow likewise. The spans are as long.
void widen(std::span<const bf16> from, std::span<float> to);
void narrow(std::span<const float> from, std::span<bf16> to);

}  // namespace loom::train
