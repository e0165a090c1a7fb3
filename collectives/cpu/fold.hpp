// The rules of a reduction's fold that the host's kernels (reduce.cpp) and
// the device's (cuda/kernels.cu) share, so that both give the same bits: what
// each element type is stored as and accumulated in (float16 and bfloat16 in
// float32, through base/half.hpp), and how two operands combine (integers
// wrap, two's complement, instead of overflowing; min and max propagate NaN).
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/half.hpp"
#include "base/host_device.hpp"
#include "collectives/cpu/reduce.hpp"

namespace loom::cpu {

// The 16-bit float types, as Element's tags.
struct Half {};
struct Bfloat16 {};

template <class T>
struct Element {
  using Stored = T;
  using Acc = T;
  LOOM_HOST_DEVICE static Acc load(Stored v) { return v; }
  LOOM_HOST_DEVICE static Stored store(Acc v) { return v; }
};
template <>
struct Element<Half> {
  using Stored = uint16_t;
  using Acc = float;
  LOOM_HOST_DEVICE static Acc load(Stored v) { return halfToFloat(v); }
  LOOM_HOST_DEVICE static Stored store(Acc v) { return floatToHalf(v); }
};
template <>
struct Element<Bfloat16> {
  using Stored = uint16_t;
  using Acc = float;
  LOOM_HOST_DEVICE static Acc load(Stored v) { return bfloat16ToFloat(v); }
  LOOM_HOST_DEVICE static Stored store(Acc v) { return floatToBfloat16(v); }
};

template <ReduceOp Op, class A>
LOOM_HOST_DEVICE inline A combine(A a, A b) {
  if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::PreMulSum || Op == ReduceOp::Prod) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;  // wraps instead of overflowing
      if constexpr (Op == ReduceOp::Prod) return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      else return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return Op == ReduceOp::Prod ? a * b : a + b;
    }
  } else {
    A chosen = Op == ReduceOp::Min ? (a < b ? a : b) : (a > b ? a : b);
    if constexpr (std::is_floating_point_v<A>) chosen = a != a ? a : chosen;  // NaN wins (b NaN: chosen is b)
    return chosen;
  }
}

}  // namespace loom::cpu
