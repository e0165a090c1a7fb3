#include "comm/engine/resident_p2p.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "base/counters.hpp"
#include "base/device/call_buffer.hpp"
#include "base/device/memop_batch.hpp"
#include "base/device/runtime.hpp"

namespace loom {
namespace {

// Where a send offers its buffer to be read in place: where its receiver's
// kernels may read it (ResidentArea::placeForPeers), and of more than two
// pieces, a message whose sender waits for its receiver anyway (from its
// third piece on), so that no send that completed alone before (eager,
// through the two slots) now waits for its receiver.
std::optional<RegionPlace> sendsInPlace(ResidentArea& area, const ResidentOp& op) {
  if (!op.send || op.bytes <= 2 * ResidentArea::kP2pSlotBytes) return std::nullopt;
  return area.placeForPeers(op.buffer);
}

// Whether `op` goes as one piece, its receiver reading it where the sender
// published it: a message of more than two pieces between ranks whose
// kernels reach each other's buffers (threads of one process on one GPU,
// ResidentArea::sharesEveryBuffer), which both ends know alike. The sender
// publishes its buffer, or a copy of it in memory of the call's own where
// the receiver may not read it as it lies, and waits until it is taken.
bool wholeMessage(const ResidentArea& area, const ResidentOp& op) {
  return area.sharesEveryBuffer() && op.bytes > 2 * ResidentArea::kP2pSlotBytes;
}

// The bytes of each piece of `op` (the last may be fewer).
size_t pieceBytes(const ResidentArea& area, const ResidentOp& op) {
  return wholeMessage(area, op) ? op.bytes : ResidentArea::kP2pSlotBytes;
}

// Every piece of `op`, queued on `stream`. A receiver copies from the place
// its sender published (its slot, or its buffer), loaded when the copy
// runs; a sender whose buffer is read in place waits after its last piece
// until the receiver has taken it.
void queueMessage(ResidentArea& area, const ResidentOp& op, std::optional<RegionPlace> inPlace,
                  cuda::MemopBatch& q) {
  cuda::DeviceRuntime& rt = cuda::runtime();
  const int me = area.rank();
  const size_t step = pieceBytes(area, op);
  std::unique_ptr<cuda::CallBuffer> copy;  // freed on the stream once taken
  if (op.send && wholeMessage(area, op) && !inPlace) {
    copy = std::make_unique<cuda::CallBuffer>(op.bytes, q);
    rt.copy(copy->data(), op.buffer, op.bytes, q.stream());
    inPlace = area.placeOfStreamMemory(copy->data());
  }
  // A send read in place publishes all its pieces with the first, as a range
  // (published_piece.hpp), and "sent" up to the last: its later pieces wait
  // for nothing, and its receiver's stream never waits for it between them.
  const uint64_t pieces = (op.bytes + step - 1) / step;
  for (size_t at = 0, index = 0; at < op.bytes; at += step, ++index) {
    const size_t bytes = std::min(step, op.bytes - at);
    const bool last = at + bytes == op.bytes;
    if (op.send) {
      const uint64_t k = area.beginSendPiece(op.peer, inPlace && last);
      if (!inPlace || index == 0) {
        if (k > 2) q.wait(area.takenBy(me, op.peer), k - 2);
        std::byte* slot = area.p2pSlot(me, op.peer, k);
        if (!inPlace) rt.copy(slot, op.buffer + at, bytes, q.stream());
        const RegionPlace place = inPlace ? *inPlace : area.areaPlace(slot);
        const uint64_t further = inPlace ? pieces - 1 : 0;
        // The sequence last: each write on the stream follows the ones before it.
        PublishedPiece* entry = area.p2pPublished(me, op.peer, k);
        q.write(&entry->input, place.offset);
        q.write(&entry->regions, regionsOf(place.region, 0, further));
        q.write(&entry->sequence, k);
        q.write(area.sentTo(op.peer, me), k + further);
      }
      if (inPlace && last) q.wait(area.takenBy(me, op.peer), k);  // its buffer is the receiver's till then
      q.write(area.sent(op.peer), k);
    } else {
      const uint64_t k = area.beginReceivePiece(op.peer);
      q.wait(area.sentTo(me, op.peer), k);
      PlaceView view = area.view(area.p2pPublished(op.peer, me, k), op.peer);
      view.other = area.p2pPublished(op.peer, me, k + 1);  // where a range may lie
      view.into = at;
      rt.copyFromPlace(op.buffer + at, view, k, false, 0, 0, bytes, q.stream());
      q.write(area.takenBy(op.peer, me), k);
      q.write(area.received(op.peer), k);
    }
  }
  if (inPlace && !copy) counters::add(counters::Counter::ResidentSendsReadInPlace);
}

// What `ops` claim of the area (their pieces, and whether a send waits at
// its end, read in place), and where each send is read in place.
std::vector<ResidentArea::MessageClaim> claimsOf(ResidentArea& area, std::span<const ResidentOp> ops,
                                                 std::vector<std::optional<RegionPlace>>& inPlace) {
  std::vector<ResidentArea::MessageClaim> claims;
  for (const ResidentOp& op : ops) {
    inPlace.push_back(sendsInPlace(area, op));
    const size_t step = pieceBytes(area, op);
    const uint64_t pieces = (op.bytes + step - 1) / step;
    const bool takenAtEnd = inPlace.back().has_value() || (op.send && wholeMessage(area, op));
    claims.push_back({.peer = op.peer, .send = op.send, .pieces = pieces, .takenAtEnd = takenAtEnd});
  }
  return claims;
}

}  // namespace

bool runsResident(const ResidentArea* area, memory::MemoryKind kind, size_t bytes, bool onCudaStream) {
  // An empty message is nothing on both sides alike (a 0-byte buffer has no memory kind to tell).
  const bool device = kind == memory::MemoryKind::CudaDevice || bytes == 0;
  return device && area != nullptr && onCudaStream;
}

std::vector<ResidentArea::MessageClaim> residentMessages(ResidentArea& area, std::span<const ResidentOp> ops) {
  std::vector<std::optional<RegionPlace>> inPlace;
  return claimsOf(area, ops, inPlace);
}

void queueResidentPointToPoint(ResidentArea& area, std::span<const ResidentOp> ops, void* stream) {
  area.openPeersRegions();
  // Where each send is read in place, then the stream claimed for all of
  // them, before anything is queued.
  std::vector<std::optional<RegionPlace>> inPlace;
  area.claimPointToPoint(claimsOf(area, ops, inPlace), stream);
  // A channel's messages, their waits and writes gathered in batches
  // (base/device/memop_batch.hpp) queued before each copy and at the end.
  const auto queue = [&](const std::vector<const ResidentOp*>& messages, void* on) {
    cuda::MemopBatch q(cuda::runtime(), on);
    for (const ResidentOp* op : messages) queueMessage(area, *op, inPlace[static_cast<size_t>(op - ops.data())], q);
    q.flush();
  };
  // The group's channels (peer, direction), each its messages in call order.
  std::map<std::pair<int, bool>, std::vector<const ResidentOp*>> channels;
  for (const ResidentOp& op : ops) {
    if (op.bytes != 0) channels[{op.peer, op.send}].push_back(&op);
  }
  if (channels.size() == 1) {  // one channel: on the caller's stream itself
    queue(channels.begin()->second, stream);
  } else if (!channels.empty()) {
    cuda::DeviceRuntime& rt = cuda::runtime();
    const cuda::EventHandle fork = rt.record(stream);
    std::vector<cuda::EventHandle> joins;
    for (const auto& [channel, messages] : channels) {
      void* side = area.channelStream(channel.first, channel.second);
      rt.waitEvent(side, fork);
      queue(messages, side);
      joins.push_back(rt.record(side));
    }
    for (cuda::EventHandle join : joins) {
      rt.waitEvent(stream, join);
      rt.destroyEvent(join);
    }
    rt.destroyEvent(fork);
  }
  counters::add(counters::Counter::ResidentPointToPointOps, ops.size());
}

}  // namespace loom
