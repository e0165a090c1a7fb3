#include "tools/check/collective_check.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/datatype.hpp"
#include "base/half.hpp"

namespace loom::check {
namespace {

// Element i of every input takes one of kKeys values, picked by a mix of i
// (a plain i % 8 would hide data moved by a multiple of 8 elements). A
// reduction's expected value depends only on that key, so it is computed
// once per key, and inputs are filled from a table of kKeys stored values.
constexpr size_t kKeys = 8;

size_t indexKey(size_t i) {
  uint64_t x = (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull;  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<size_t>((x ^ (x >> 31)) % kKeys);
}

bool isFloat(loomDataType_t t) {
  return t == loomFloat16 || t == loomBfloat16 || t == loomFloat32 || t == loomFloat64;
}
bool isSigned(loomDataType_t t) { return t == loomInt8 || t == loomInt32 || t == loomInt64 || isFloat(t); }

template <class T>
void put(void* p, size_t i, T v) {
  std::memcpy(static_cast<std::byte*>(p) + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T get(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::byte*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

// Stores an exact small value (integers: modulo 2^bits, as wrapping sums do).
void store(loomDataType_t t, void* p, size_t i, double v) {
  const auto wrapped = static_cast<uint64_t>(static_cast<int64_t>(v));
  switch (t) {
    case loomInt8: case loomUint8: return put<uint8_t>(p, i, static_cast<uint8_t>(wrapped));
    case loomInt32: case loomUint32: return put<uint32_t>(p, i, static_cast<uint32_t>(wrapped));
    case loomInt64: case loomUint64: return put<uint64_t>(p, i, wrapped);
    case loomFloat16: return put<uint16_t>(p, i, cpu::floatToHalf(static_cast<float>(v)));
    case loomBfloat16: return put<uint16_t>(p, i, cpu::floatToBfloat16(static_cast<float>(v)));
    case loomFloat32: return put<float>(p, i, static_cast<float>(v));
    case loomFloat64: return put<double>(p, i, v);
    default: return;
  }
}

double load(loomDataType_t t, const void* p, size_t i) {
  switch (t) {
    case loomInt8: return get<int8_t>(p, i);
    case loomUint8: return get<uint8_t>(p, i);
    case loomInt32: return get<int32_t>(p, i);
    case loomUint32: return get<uint32_t>(p, i);
    case loomInt64: return static_cast<double>(get<int64_t>(p, i));
    case loomUint64: return static_cast<double>(get<uint64_t>(p, i));
    case loomFloat16: return static_cast<double>(cpu::halfToFloat(get<uint16_t>(p, i)));
    case loomBfloat16: return static_cast<double>(cpu::bfloat16ToFloat(get<uint16_t>(p, i)));
    case loomFloat32: return static_cast<double>(get<float>(p, i));
    case loomFloat64: return get<double>(p, i);
    default: return 0;
  }
}

// The value `v` takes once stored in `t` (integers wrap), read back.
double asStored(loomDataType_t t, double v) {
  std::byte cell[8];
  store(t, cell, 0, v);
  return load(t, cell, 0);
}

// Integer average as the library computes it: the wrapped sum divided in the type.
double integerAverage(loomDataType_t t, double sum, int n) {
  const auto s = static_cast<int64_t>(sum);
  switch (t) {
    case loomInt8: return static_cast<int8_t>(static_cast<int8_t>(s) / n);
    case loomUint8: return static_cast<uint8_t>(static_cast<uint8_t>(s) / n);
    case loomInt32: return static_cast<int32_t>(s) / n;
    case loomUint32: return static_cast<uint32_t>(s) / static_cast<uint32_t>(n);
    case loomInt64: return static_cast<double>(s / n);
    default: return static_cast<double>(static_cast<uint64_t>(s) / static_cast<uint64_t>(n));
  }
}

// One ulp of `t` at magnitude |v|.
double ulp(loomDataType_t t, double v) {
  const int bits = t == loomFloat16 ? 11 : t == loomBfloat16 ? 8 : t == loomFloat32 ? 24 : 53;
  const double a = std::max(std::fabs(v), t == loomFloat16 ? 6.1e-5 : 1e-30);
  return std::ldexp(1.0, std::ilogb(a) - (bits - 1));
}

}  // namespace

const char* collName(Coll c) {
  constexpr const char* kNames[] = {"Broadcast", "Reduce", "AllReduce", "ReduceScatter",
                                    "AllGather", "AlltoAll", "Gather",   "Scatter", "SendRecv"};
  return kNames[static_cast<int>(c)];
}
const char* opName(Op op) {
  constexpr const char* kNames[] = {"sum", "prod", "min", "max", "avg", "premulsum"};
  return kNames[static_cast<int>(op)];
}
const char* typeName(loomDataType_t t) { return datatypeName(t); }
size_t typeSize(loomDataType_t t) {
  constexpr size_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return kSizes[t];
}
bool reduces(Coll c) { return c == Coll::Reduce || c == Coll::AllReduce || c == Coll::ReduceScatter; }
double preMulScalar(int rank) { return 1 + rank % 2; }

// Sums of up to 16 ranks stay below 256 (exact in bfloat16's 8 bits, also
// after PreMulSum's factor 2); products have at most 4 factors of 2.
namespace {
double keyValue(Op op, loomDataType_t type, int rank, size_t key) {
  if (op == Op::Prod) return (static_cast<size_t>(rank) + key) % 4 == 0 ? 2 : 1;
  const double v = static_cast<double>((static_cast<size_t>(rank) * 7 + key * 13 + 3) % 8);
  return isSigned(type) ? v - 3 : v;
}
}  // namespace

double inputValue(Op op, loomDataType_t type, int rank, size_t i) { return keyValue(op, type, rank, indexKey(i)); }

void storeValue(loomDataType_t type, void* buffer, size_t i, double v) { store(type, buffer, i, v); }

void fillInput(void* buffer, Op op, loomDataType_t type, int rank, size_t first, size_t count) {
  const size_t size = typeSize(type);
  std::array<std::byte, kKeys * 8> stored{};  // each key's value, as `type`
  for (size_t key = 0; key < kKeys; ++key) store(type, stored.data() + key * size, 0, keyValue(op, type, rank, key));
  auto* bytes = static_cast<std::byte*>(buffer);
  for (size_t i = 0; i < count; ++i) std::memcpy(bytes + i * size, stored.data() + indexKey(first + i) * size, size);
}

size_t sendElements(const Case& c) {
  const auto n = static_cast<size_t>(c.nranks);
  switch (c.coll) {
    case Coll::ReduceScatter: case Coll::AlltoAll: case Coll::Scatter: return c.count * n;
    default: return c.count;
  }
}

size_t recvElements(const Case& c) {
  const auto n = static_cast<size_t>(c.nranks);
  switch (c.coll) {
    case Coll::AllGather: case Coll::AlltoAll: case Coll::Gather: return c.count * n;
    default: return c.count;
  }
}

bool hasResult(const Case& c) { return (c.coll != Coll::Reduce && c.coll != Coll::Gather) || c.rank == c.root; }

void fillSend(const Case& c, void* send) { fillInput(send, c.op, c.type, c.rank, 0, sendElements(c)); }

namespace {

// Calls onWrong(element, got, expected) for each mismatch until it returns false.
template <class OnWrong>
void compare(const Case& c, const void* recv, OnWrong&& onWrong) {
  if (!hasResult(c)) return;
  // The reduction over every rank of the elements with this key, as stored in the type.
  const auto reduction = [&](size_t key) {
    double acc = 0;
    for (int r = 0; r < c.nranks; ++r) {
      double v = keyValue(c.op, c.type, r, key);
      if (c.op == Op::PreMulSum) v = asStored(c.type, v * preMulScalar(r));
      switch (c.op) {
        case Op::Sum: case Op::Avg: case Op::PreMulSum: acc = r == 0 ? v : acc + v; break;
        case Op::Prod: acc = r == 0 ? v : acc * v; break;
        case Op::Min: acc = r == 0 ? v : std::min(acc, v); break;
        case Op::Max: acc = r == 0 ? v : std::max(acc, v); break;
      }
    }
    if (c.op == Op::Avg) return isFloat(c.type) ? acc / c.nranks : integerAverage(c.type, acc, c.nranks);
    return asStored(c.type, acc);
  };
  std::array<double, kKeys> folded{};
  if (reduces(c.coll)) {
    for (size_t key = 0; key < kKeys; ++key) folded[key] = reduction(key);
  }
  const auto fold = [&](size_t index) { return folded[indexKey(index)]; };
  for (size_t e = 0; e < recvElements(c); ++e) {
    // Which input element(s) land at e: (source rank, index in its send buffer).
    double expected = 0;
    switch (c.coll) {
      case Coll::Broadcast: expected = inputValue(c.op, c.type, c.root, e); break;
      case Coll::Reduce: case Coll::AllReduce: expected = fold(e); break;
      case Coll::ReduceScatter: expected = fold(static_cast<size_t>(c.rank) * c.count + e); break;
      case Coll::AllGather: case Coll::Gather:
        expected = inputValue(c.op, c.type, static_cast<int>(e / c.count), e % c.count);
        break;
      case Coll::AlltoAll:
        expected = inputValue(c.op, c.type, static_cast<int>(e / c.count), static_cast<size_t>(c.rank) * c.count + e % c.count);
        break;
      case Coll::Scatter: expected = inputValue(c.op, c.type, c.root, static_cast<size_t>(c.rank) * c.count + e); break;
      case Coll::SendRecv: expected = inputValue(c.op, c.type, (c.rank + c.nranks - 1) % c.nranks, e); break;
    }
    if (!reduces(c.coll)) expected = asStored(c.type, expected);
    const double got = load(c.type, recv, e);
    const bool approximate = c.op == Op::Avg && isFloat(c.type) && reduces(c.coll);
    const bool ok = approximate ? std::fabs(got - expected) <= 2 * ulp(c.type, expected) : got == expected;
    if (!ok && !onWrong(e, got, expected)) return;
  }
}

}  // namespace

std::string checkResult(const Case& c, const void* recv) {
  std::string first;
  compare(c, recv, [&](size_t e, double got, double expected) {
    first = "element " + std::to_string(e) + " of " + std::to_string(recvElements(c)) + ": got " +
            std::to_string(got) + ", expected " + std::to_string(expected);
    return false;
  });
  return first;
}

size_t wrongElements(const Case& c, const void* recv) {
  size_t wrong = 0;
  compare(c, recv, [&](size_t, double, double) { return ++wrong, true; });
  return wrong;
}

}  // namespace loom::check
