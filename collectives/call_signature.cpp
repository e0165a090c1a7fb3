#include "collectives/call_signature.hpp"

#include <cstdio>

#include "base/datatype.hpp"
#include "comm/engine/message_match.hpp"

namespace loom::coll {
namespace {

constexpr uint32_t kRootMask = (1u << 20) - 1;

// The reduction as loom.h names it; 0 for collectives that do not reduce.
enum ReductionCode : uint32_t { kNone, kSum, kProd, kMin, kMax, kAvg, kPreMulSum };

bool reduces(CollectiveKind kind) {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::Reduce || kind == CollectiveKind::ReduceScatter;
}

bool rooted(CollectiveKind kind) {
  return kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce || kind == CollectiveKind::Gather ||
         kind == CollectiveKind::Scatter;
}

uint32_t reductionCode(const Collective& c) {
  if (!reduces(c.kind)) return kNone;
  if (c.reduction.average) return kAvg;
  switch (c.reduction.op) {
    case cpu::ReduceOp::Sum: return kSum;
    case cpu::ReduceOp::Prod: return kProd;
    case cpu::ReduceOp::Min: return kMin;
    case cpu::ReduceOp::Max: return kMax;
    case cpu::ReduceOp::PreMulSum: return kPreMulSum;
  }
  return kNone;
}

const char* reductionName(uint32_t code) {
  constexpr const char* kNames[] = {"", "sum", "prod", "min", "max", "avg", "premulsum"};
  return code < std::size(kNames) ? kNames[code] : "?";
}

}  // namespace

uint32_t callSignature(const Collective& c) {
  const uint32_t kind = static_cast<uint32_t>(c.kind) + 1;
  const uint32_t root = rooted(c.kind) ? static_cast<uint32_t>(c.root) & kRootMask : 0;
  return kind | static_cast<uint32_t>(c.type) << 4 | reductionCode(c) << 8 | root << 12;
}

std::string describeCall(uint32_t call, uint32_t sequence) {
  const uint32_t kind = call & 0xf;
  if (kind == 0) return "a point-to-point call";
  if (kind > static_cast<uint32_t>(kCollectiveKinds)) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%#x", call);
    return std::string("an unknown call ") + hex + " #" + std::to_string(sequence);
  }
  const auto collective = static_cast<CollectiveKind>(kind - 1);
  std::string what = std::string(collectiveName(collective)) + " #" + std::to_string(sequence) + " (" +
                     datatypeName(static_cast<loomDataType_t>(call >> 4 & 0xf));
  const uint32_t reduction = call >> 8 & 0xf;
  if (reduction != kNone) what += std::string(" ") + reductionName(reduction);
  if (rooted(collective)) what += ", root " + std::to_string(call >> 12);
  return what + ")";
}

std::string describeCollectiveMessage(const transport::SlotTag& tag) {
  if ((tag.call & 0xf) == 0) return describeP2pMessage(tag);
  return "a " + std::to_string(tag.messageBytes) + "-byte piece of " + describeCall(tag.call, tag.message);
}

}  // namespace loom::coll
