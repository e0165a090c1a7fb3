#include "comm/engine/resident_p2p.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>
#include <vector>

#include "base/device/runtime.hpp"

namespace loom {
namespace {

std::atomic<uint64_t> queued{0};

// Every piece of `op`, queued on `stream`.
void queueMessage(ResidentArea& area, const ResidentOp& op, void* stream) {
  cuda::DeviceRuntime& rt = cuda::runtime();
  const int me = area.rank();
  for (size_t at = 0; at < op.bytes; at += ResidentArea::kP2pSlotBytes) {
    const size_t bytes = std::min(ResidentArea::kP2pSlotBytes, op.bytes - at);
    if (op.send) {
      const uint64_t k = area.beginSendPiece(op.peer);
      if (k > 2) rt.waitValue(stream, area.takenBy(me, op.peer), k - 2);
      rt.copy(area.p2pSlot(me, op.peer, k), op.buffer + at, bytes, stream);
      rt.writeValue(stream, area.sentTo(op.peer, me), k);
      rt.writeValue(stream, area.sent(op.peer), k);
    } else {
      const uint64_t k = area.beginReceivePiece(op.peer);
      rt.waitValue(stream, area.sentTo(me, op.peer), k);
      rt.copy(op.buffer + at, area.p2pSlot(op.peer, me, k), bytes, stream);
      rt.writeValue(stream, area.takenBy(op.peer, me), k);
      rt.writeValue(stream, area.received(op.peer), k);
    }
  }
}

}  // namespace

bool runsResident(const ResidentArea* area, memory::MemoryKind kind, size_t bytes, bool onCudaStream) {
  // An empty message is nothing on both sides alike (a 0-byte buffer has no memory kind to tell).
  const bool device = kind == memory::MemoryKind::CudaDevice || bytes == 0;
  return device && area != nullptr && onCudaStream;
}

void queueResidentPointToPoint(ResidentArea& area, std::span<const ResidentOp> ops, void* stream) {
  // The group's channels (peer, direction), each its messages in call order.
  std::map<std::pair<int, bool>, std::vector<const ResidentOp*>> channels;
  for (const ResidentOp& op : ops) {
    if (op.bytes != 0) channels[{op.peer, op.send}].push_back(&op);
  }
  if (channels.size() == 1) {  // one channel: on the caller's stream itself
    for (const ResidentOp* op : channels.begin()->second) queueMessage(area, *op, stream);
  } else if (!channels.empty()) {
    cuda::DeviceRuntime& rt = cuda::runtime();
    const cuda::EventHandle fork = rt.record(stream);
    std::vector<cuda::EventHandle> joins;
    for (const auto& [channel, messages] : channels) {
      void* side = area.channelStream(channel.first, channel.second);
      rt.waitEvent(side, fork);
      for (const ResidentOp* op : messages) queueMessage(area, *op, side);
      joins.push_back(rt.record(side));
    }
    for (cuda::EventHandle join : joins) {
      rt.waitEvent(stream, join);
      rt.destroyEvent(join);
    }
    rt.destroyEvent(fork);
  }
  queued.fetch_add(ops.size(), std::memory_order_relaxed);
}

uint64_t residentPointToPointOps() { return queued.load(std::memory_order_relaxed); }

}  // namespace loom
