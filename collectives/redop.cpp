#include "collectives/redop.hpp"

#include <atomic>
#include <cstring>
#include <string>

#include "base/datatype.hpp"
#include "base/device/cuda.hpp"
#include "base/error.hpp"
#include "base/half.hpp"
#include "memory/memory_kind.hpp"

namespace loom::coll {
namespace {

// A created op is kCreated | serial << 16 | slot: 14 bits of communicator
// serial, 16 bits of slot, all above loomNumOps.
constexpr uint32_t kCreated = 0x40000000u;
constexpr uint32_t kSerialBits = 14;
constexpr uint32_t kMaxOps = 1u << 16;

std::atomic<uint32_t> nextSerial{0};

template <class T>
double load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<double>(v);
}

std::string opText(loomRedOp_t op) { return "op=" + std::to_string(static_cast<int>(op)); }

}  // namespace

double scalarValue(const void* scalar, loomDataType_t type) {
  // A device's scalar (loomScalarDevice with device memory) is read through a copy.
  std::byte local[8];
  const void* p = scalar;
  if (memory::kindOf(scalar, 1) == memory::MemoryKind::CudaDevice) {
    cuda::copyFromDevice(local, scalar, datatypeSize(type));
    p = local;
  }
  switch (type) {
    case loomInt8: return load<int8_t>(p);
    case loomUint8: return load<uint8_t>(p);
    case loomInt32: return load<int32_t>(p);
    case loomUint32: return load<uint32_t>(p);
    case loomInt64: return load<int64_t>(p);
    case loomUint64: return load<uint64_t>(p);
    case loomFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(cpu::halfToFloat(h));
    }
    case loomBfloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(cpu::bfloat16ToFloat(h));
    }
    case loomFloat32: return load<float>(p);
    case loomFloat64: return load<double>(p);
    default: throw Error(loomInvalidArgument, "datatype=" + std::to_string(static_cast<int>(type)) + " is not a loomDataType_t");
  }
}

RedOpTable::RedOpTable() : serial_(nextSerial.fetch_add(1) & ((1u << kSerialBits) - 1)) {}

loomRedOp_t RedOpTable::create(const void* scalar, loomDataType_t type, loomScalarResidence_t residence) {
  if (residence != loomScalarDevice && residence != loomScalarHostImmediate) {
    throw Error(loomInvalidArgument, "residence=" + std::to_string(static_cast<int>(residence)) +
                                         " is neither loomScalarDevice nor loomScalarHostImmediate");
  }
  PreMulSum op{.type = type,
               .residence = residence,
               .pointer = scalar,
               .value = residence == loomScalarHostImmediate ? scalarValue(scalar, type) : 0.0};
  std::lock_guard lock(mutex_);
  size_t slot = 0;
  while (slot < ops_.size() && ops_[slot]) ++slot;
  if (slot == kMaxOps) throw Error(loomInvalidUsage, "too many PreMulSum ops on this communicator (65536 live)");
  if (slot == ops_.size()) ops_.emplace_back();
  ops_[slot] = op;
  return static_cast<loomRedOp_t>(kCreated | serial_ << 16 | static_cast<uint32_t>(slot));
}

const RedOpTable::PreMulSum& RedOpTable::lookup(loomRedOp_t op) const {
  const auto value = static_cast<uint32_t>(op);
  if ((value & ~0x3fffffffu) != kCreated) {
    throw Error(loomInvalidArgument, opText(op) + " is neither a built-in loomRedOp_t nor a created op");
  }
  if ((value >> 16 & ((1u << kSerialBits) - 1)) != serial_) {
    throw Error(loomInvalidArgument, opText(op) + " was created on another communicator");
  }
  const size_t slot = value & (kMaxOps - 1);
  if (slot >= ops_.size() || !ops_[slot]) throw Error(loomInvalidArgument, opText(op) + " was destroyed");
  return *ops_[slot];
}

void RedOpTable::destroy(loomRedOp_t op) {
  if (static_cast<uint32_t>(op) < loomNumOps) {
    throw Error(loomInvalidArgument, opText(op) + " is a built-in op (only created ops are destroyed)");
  }
  std::lock_guard lock(mutex_);
  lookup(op);
  ops_[static_cast<uint32_t>(op) & (kMaxOps - 1)].reset();
}

Reduction RedOpTable::resolve(loomRedOp_t op, loomDataType_t type) const {
  switch (op) {
    case loomSum: return {.op = cpu::ReduceOp::Sum};
    case loomProd: return {.op = cpu::ReduceOp::Prod};
    case loomMax: return {.op = cpu::ReduceOp::Max};
    case loomMin: return {.op = cpu::ReduceOp::Min};
    case loomAvg: return {.op = cpu::ReduceOp::Sum, .average = true};
    default: break;
  }
  std::lock_guard lock(mutex_);
  const PreMulSum& p = lookup(op);
  if (p.type != type) {
    throw Error(loomInvalidArgument, opText(op) + " was created for datatype " + std::to_string(p.type) +
                                         ", not " + std::to_string(type));
  }
  return {.op = cpu::ReduceOp::PreMulSum,
          .scalar = p.residence == loomScalarHostImmediate ? p.value : scalarValue(p.pointer, p.type)};
}

}  // namespace loom::coll
