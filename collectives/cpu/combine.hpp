// How two operands of a reduction combine: the one rule that the host's
// kernels (reduce.cpp) and the device's (cuda/kernels.cu) both fold with, so
// that they give the same bits. Integers wrap (two's complement) instead of
// overflowing; min and max propagate NaN.
#pragma once

#include <type_traits>

#include "base/host_device.hpp"
#include "collectives/cpu/reduce.hpp"

namespace loom::cpu {

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
