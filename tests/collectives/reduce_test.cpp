// The reduction kernels against references computed element by element:
// every dtype and op, 1 to 8 sources, odd counts and alignments, in place;
// and the 16-bit conversions against independent roundings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/half.hpp"
#include "collectives/cpu/half_block.hpp"
#include "collectives/cpu/reduce.hpp"

using loom::cpu::ReduceOp;

namespace {

// _Float16 is the compiler's own half type: GCC 12 has it on x86-64, Clang 14
// does not (the ASan preset builds with Clang; the other presets run these).
#ifdef __FLT16_MAX__
#define LOOM_REQUIRE_FLOAT16()
using Float16Reference = _Float16;
#else
#define LOOM_REQUIRE_FLOAT16() GTEST_SKIP() << "this compiler has no _Float16 to compare against"
using Float16Reference = float;  // never used: the tests skip first
#endif

TEST(Half, EveryHalfSurvivesARoundTripThroughFloat) {
  LOOM_REQUIRE_FLOAT16();
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = loom::cpu::halfToFloat(static_cast<uint16_t>(h));
    Float16Reference reference;
    uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&reference, &bits, 2);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(reference))) << h;
      EXPECT_TRUE(std::isnan(loom::cpu::halfToFloat(loom::cpu::floatToHalf(f)))) << h;
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(reference)) << h;
    ASSERT_EQ(loom::cpu::floatToHalf(f), h) << h;
  }
}

TEST(Half, FloatToHalfRoundsToNearestEvenLikeTheCompiler) {
  LOOM_REQUIRE_FLOAT16();
  std::mt19937 rng(1);
  auto check = [](float f) {
    Float16Reference reference = static_cast<Float16Reference>(f);  // GCC's conversion: round to nearest even
    uint16_t expected;
    std::memcpy(&expected, &reference, 2);
    ASSERT_EQ(loom::cpu::floatToHalf(f), expected) << f;
  };
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isnan(f)) check(f);
  }
  for (float f : {65504.f, 65519.99f, 65520.f, 1e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f, -0.f, 1.f / 3.f}) check(f);
}

TEST(Half, BlockConversionsMatchTheScalarOnes) {
  // F16C where the CPU has it: every half, and 1 M random floats, odd block sizes.
  std::vector<uint16_t> halves(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> floats(halves.size());
  loom::cpu::halfToFloatBlock(reinterpret_cast<const std::byte*>(halves.data()) + 2, floats.data(), halves.size() - 1);
  for (size_t i = 0; i + 1 < halves.size(); ++i) {
    float scalar = loom::cpu::halfToFloat(halves[i + 1]);
    if (std::isnan(scalar)) ASSERT_TRUE(std::isnan(floats[i])) << i;
    else ASSERT_EQ(floats[i], scalar) << i;
  }
  std::mt19937 rng(3);
  std::vector<float> in(1 << 20);
  for (auto& f : in) {
    uint32_t bits = rng();
    std::memcpy(&f, &bits, 4);
  }
  std::vector<uint16_t> out(in.size());
  loom::cpu::floatToHalfBlock(in.data(), reinterpret_cast<std::byte*>(out.data()), in.size() - 3);
  for (size_t i = 0; i + 3 < in.size(); ++i) {
    if (std::isnan(in[i])) ASSERT_TRUE(std::isnan(loom::cpu::halfToFloat(out[i]))) << i;
    else ASSERT_EQ(out[i], loom::cpu::floatToHalf(in[i])) << in[i];
  }
}

// The bfloat16 nearest to f by exhaustive comparison in double; ties to even.
uint16_t bfloat16Reference(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t down = static_cast<uint16_t>(bits >> 16), up = static_cast<uint16_t>(down + 1);
  double dDown = std::fabs(double(loom::cpu::bfloat16ToFloat(down)) - double(f));
  double dUp = std::fabs(double(loom::cpu::bfloat16ToFloat(up)) - double(f));
  if (dDown < dUp || (dDown == dUp && (down & 1) == 0)) return down;
  return up;
}

TEST(Bfloat16, FloatToBfloat16RoundsToNearestEven) {
  std::mt19937 rng(2);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f) || std::isinf(f) || std::fabs(f) > 3.3e38f) continue;
    ASSERT_EQ(loom::cpu::floatToBfloat16(f), bfloat16Reference(f)) << f;
  }
  EXPECT_TRUE(std::isnan(loom::cpu::bfloat16ToFloat(loom::cpu::floatToBfloat16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(loom::cpu::bfloat16ToFloat(loom::cpu::floatToBfloat16(3.4e38f))));
}

// Values are small integers (exact in every type, any order of summation) or,
// for prod, powers of two and ones, so every result is exact.
template <class T>
struct Ref {
  static double toDouble(T v) { return static_cast<double>(v); }
  static T fromDouble(double v) { return static_cast<T>(v); }
};
struct Half16 {
  uint16_t bits;
};
struct Brain16 {
  uint16_t bits;
};
template <>
struct Ref<Half16> {
  static double toDouble(Half16 v) { return static_cast<double>(loom::cpu::halfToFloat(v.bits)); }
  static Half16 fromDouble(double v) { return {loom::cpu::floatToHalf(static_cast<float>(v))}; }
};
template <>
struct Ref<Brain16> {
  static double toDouble(Brain16 v) { return static_cast<double>(loom::cpu::bfloat16ToFloat(v.bits)); }
  static Brain16 fromDouble(double v) { return {loom::cpu::floatToBfloat16(static_cast<float>(v))}; }
};

double inputValue(ReduceOp op, size_t source, size_t i, bool isSigned) {
  if (op == ReduceOp::Prod) return ((i + source) % 3 == 0) ? 2.0 : 1.0;
  double v = static_cast<double>((i * 7 + source * 13) % 23);
  return isSigned && (i + source) % 2 ? -v : v;
}

double expected(ReduceOp op, size_t nsources, size_t i, bool isSigned, double scalar) {
  double acc = inputValue(op, 0, i, isSigned) * (op == ReduceOp::PreMulSum ? scalar : 1);
  for (size_t s = 1; s < nsources; ++s) {
    double v = inputValue(op, s, i, isSigned) * (op == ReduceOp::PreMulSum ? scalar : 1);
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::PreMulSum: acc += v; break;
      case ReduceOp::Prod: acc *= v; break;
      case ReduceOp::Min: acc = std::min(acc, v); break;
      case ReduceOp::Max: acc = std::max(acc, v); break;
    }
  }
  return acc;
}

template <class T>
void checkType(loomDataType_t type, bool isSigned) {
  const size_t counts[] = {0, 1, 7, 511, 512, 513, 4097};
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::PreMulSum};
  for (ReduceOp op : ops) {
    const double scalar = op == ReduceOp::PreMulSum ? 2.0 : 1.0;
    for (size_t nsources : {1, 2, 3, 5, 8}) {
      for (size_t count : counts) {
        // Each buffer one byte off alignment; the last source doubles as dst (in place).
        std::vector<std::vector<std::byte>> storage(nsources, std::vector<std::byte>(count * sizeof(T) + 1));
        std::vector<const void*> sources;
        for (size_t s = 0; s < nsources; ++s) {
          for (size_t i = 0; i < count; ++i) {
            T v = Ref<T>::fromDouble(inputValue(op, s, i, isSigned));
            std::memcpy(storage[s].data() + 1 + i * sizeof(T), &v, sizeof(T));
          }
          sources.push_back(storage[s].data() + 1);
        }
        std::vector<std::byte> out(count * sizeof(T) + 3);
        void* dst = (count % 2) ? out.data() + 3 : storage[0].data() + 1;  // out of place and in place
        loom::cpu::reduce(type, op, sources, dst, count, scalar);
        for (size_t i = 0; i < count; ++i) {
          T got;
          std::memcpy(&got, static_cast<std::byte*>(dst) + i * sizeof(T), sizeof(T));
          ASSERT_EQ(Ref<T>::toDouble(got), Ref<T>::toDouble(Ref<T>::fromDouble(expected(op, nsources, i, isSigned, scalar))))
              << "type " << type << " op " << static_cast<int>(op) << " sources " << nsources << " count " << count
              << " i " << i;
        }
      }
    }
  }
}

TEST(Reduce, EveryTypeOpSourceCountAndAlignmentIsExact) {
  checkType<int8_t>(loomInt8, true);
  checkType<uint8_t>(loomUint8, false);
  checkType<int32_t>(loomInt32, true);
  checkType<uint32_t>(loomUint32, false);
  checkType<int64_t>(loomInt64, true);
  checkType<uint64_t>(loomUint64, false);
  checkType<Half16>(loomFloat16, true);
  checkType<Brain16>(loomBfloat16, true);
  checkType<float>(loomFloat32, true);
  checkType<double>(loomFloat64, true);
}

TEST(Reduce, SixteenBitTypesAccumulateInFloatAndRoundOnce) {
  // 2048 + 1 + 1 in float16: rounding after each step gives 2048 (the ulp is
  // 2 there, ties to even), accumulating in float32 gives 2050.
  const uint16_t a = loom::cpu::floatToHalf(2048.f), one = loom::cpu::floatToHalf(1.f);
  const void* sources[] = {&a, &one, &one};
  uint16_t out = 0;
  loom::cpu::reduce(loomFloat16, ReduceOp::Sum, sources, &out, 1);
  EXPECT_EQ(loom::cpu::halfToFloat(out), 2050.f);
}

TEST(Reduce, IntegersWrapAndMinMaxPropagateNaN) {
  const int8_t big = 127, one = 1;
  const void* ints[] = {&big, &one};
  int8_t sum = 0;
  loom::cpu::reduce(loomInt8, ReduceOp::Sum, ints, &sum, 1);
  EXPECT_EQ(sum, -128);
  const float nan = std::numeric_limits<float>::quiet_NaN(), x = 1.f;
  for (auto order : {std::pair{&nan, &x}, std::pair{&x, &nan}}) {
    const void* floats[] = {order.first, order.second};
    float m = 0;
    loom::cpu::reduce(loomFloat32, ReduceOp::Min, floats, &m, 1);
    EXPECT_TRUE(std::isnan(m));
    loom::cpu::reduce(loomFloat32, ReduceOp::Max, floats, &m, 1);
    EXPECT_TRUE(std::isnan(m));
  }
}

TEST(Reduce, IntegerDivideTruncatesTowardZero) {
  int32_t v[] = {7, -7, 8};
  loom::cpu::divide(loomInt32, v, 3, 2);
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], -3);
  EXPECT_EQ(v[2], 4);
}

}  // namespace
