#include "transport/connection.hpp"

#include "base/copy_bytes.hpp"
#include "base/error.hpp"

namespace loom::transport {

void SendConnection::commitFrom(std::span<const std::byte> data, SlotTag tag) {
  const std::span<std::byte> slot = reserve();
  if (slot.size() < data.size() || data.size() != tag.bytes) {
    throw Error(loomInternalError, "commitFrom: " + std::to_string(data.size()) + " bytes for a slot of " +
                                       std::to_string(slot.size()) + " (tag says " + std::to_string(tag.bytes) + ")");
  }
  copyBytes(slot.data(), data.data(), data.size());
  commit(tag);
}

void requireHostSlots(memory::MemoryKind kind, const std::string& peer) {
  if (!memory::hostReachable(kind)) {
    throw Error(loomInternalError, "the connection with " + peer + " keeps its slots in " +
                                       memory::memoryKindName(kind) + " memory, which a CPU thread cannot touch");
  }
}

}  // namespace loom::transport
