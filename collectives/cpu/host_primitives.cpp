#include "collectives/cpu/host_primitives.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "base/copy_bytes.hpp"
#include "base/error.hpp"
#include "collectives/call_signature.hpp"
#include "comm/engine/message_match.hpp"

namespace loom::coll {

HostPrimitives::HostPrimitives(Links& links, int prev, int next, const PrimitiveCall& call)
    : links_(links), prev_(prev), next_(next), call_(call) {}

void HostPrimitives::send(const std::byte* src, size_t bytes) { run(kSend, src, nullptr, bytes); }
void HostPrimitives::recv(std::byte* dst, size_t bytes) { run(kRecv | kCopy, nullptr, dst, bytes); }
void HostPrimitives::recvReduceSend(const std::byte* src, size_t bytes) {
  run(kRecv | kReduce | kSend, src, nullptr, bytes);
}
void HostPrimitives::recvReduceCopy(const std::byte* src, std::byte* dst, size_t bytes) {
  run(kRecv | kReduce | kCopy, src, dst, bytes);
}
void HostPrimitives::recvReduceCopySend(const std::byte* src, std::byte* dst, size_t bytes) {
  run(kRecv | kReduce | kCopy | kSend, src, dst, bytes);
}
void HostPrimitives::recvCopySend(std::byte* dst, size_t bytes) { run(kRecv | kCopy | kSend, nullptr, dst, bytes); }
void HostPrimitives::copySend(const std::byte* src, std::byte* dst, size_t bytes) {
  run(kCopy | kSend, src, dst, bytes);
}

transport::SendConnection& HostPrimitives::out() {
  transport::SendConnection& connection = links_.to(next_);
  transport::requireHostSlots(connection.slotKind(), connection.peerName());
  return connection;
}

transport::RecvConnection& HostPrimitives::in() {
  transport::RecvConnection& connection = links_.from(prev_);
  transport::requireHostSlots(connection.slotKind(), connection.peerName());
  return connection;
}

void HostPrimitives::checkTag(const transport::RecvSlot& slot, size_t bytes, size_t offset) const {
  requireMatch(slot.tag, {bytes, call_.sequence, call_.call, describeCollectiveMessage}, offset, prev_, links_.what());
  if (slot.data.size() % call_.typeSize != 0) {
    throw Error(loomRemoteError, links_.what() + ": rank " + std::to_string(prev_) + " sent a slot of " +
                                     std::to_string(slot.data.size()) + " bytes, not whole elements");
  }
}

transport::SlotTag HostPrimitives::tag(size_t bytes, size_t offset, size_t payload, uint32_t index) const {
  return {.messageBytes = bytes,
          .offset = offset,
          .bytes = static_cast<uint32_t>(payload),
          .message = call_.sequence,
          .index = index,
          .call = call_.call};
}

void HostPrimitives::sendRecv(const std::byte* src, std::byte* dst, size_t bytes) {
  if (bytes == 0) return;
  transport::SendConnection& out = this->out();  // first: see run()
  transport::RecvConnection& in = this->in();
  const size_t outPiece = out.slotBytes() - out.slotBytes() % call_.typeSize;
  const transport::ReceiveInto direct(in, {dst, bytes}, call_.sequence);
  size_t sent = 0;
  size_t received = 0;
  uint32_t slots = 0;
  while (sent < bytes || received < bytes) {
    bool moved = false;
    while (sent < bytes) {
      if (out.reserve().empty()) break;
      const size_t n = std::min(bytes - sent, outPiece);
      out.commitFrom({src + sent, n}, tag(bytes, sent, n, slots++));
      out.progress();  // on its way now: the peer can start on it
      sent += n;
      moved = true;
    }
    while (received < bytes) {
      auto slot = in.peek();
      if (!slot) break;
      checkTag(*slot, bytes, received);
      if (slot->data.size() > bytes - received) {
        throw Error(loomRemoteError, links_.what() + ": rank " + std::to_string(prev_) + " sent a malformed slot");
      }
      // Where it landed already, when the connection received it into dst (receiveInto).
      if (slot->data.data() != dst + received) copyBytes(dst + received, slot->data.data(), slot->data.size());
      received += slot->data.size();
      in.release();
      moved = true;
    }
    if (!moved) {
      const int peer = received < bytes ? prev_ : next_;
      links_.waitUntil([&] { return (sent < bytes && !out.reserve().empty()) || (received < bytes && in.peek()); },
                       peer);
    }
  }
  out.keepPayloads();  // src may change once this returns
}

// One loop for every primitive: per piece, wait for an inbound slot and/or
// a free outbound slot, compute the piece once, send it, and copy it where
// else it goes.
void HostPrimitives::run(unsigned flow, const std::byte* src, std::byte* dst, size_t bytes) {
  if (bytes == 0) return;
  // Connect out first: connecting needs only the peer's listener, while
  // from() waits for the peer to connect, and two ranks that each waited for
  // the other to connect first would wait forever.
  transport::SendConnection* out = (flow & kSend) ? &this->out() : nullptr;
  transport::RecvConnection* in = (flow & kRecv) ? &this->in() : nullptr;
  const size_t outPiece = out ? out->slotBytes() - out->slotBytes() % call_.typeSize : bytes;
  if (outPiece == 0) throw Error(loomInternalError, "a FIFO slot is smaller than one element");
  // What only lands in dst may land there straight from the network.
  std::optional<transport::ReceiveInto> direct;
  if (in && (flow & kCopy) && !(flow & kReduce)) direct.emplace(*in, std::span(dst, bytes), call_.sequence);

  size_t done = 0;
  uint32_t slots = 0;
  while (done < bytes) {
    std::optional<transport::RecvSlot> slot;
    if (in) {
      links_.waitUntil([&] { return (slot = in->peek()).has_value(); }, prev_);
      checkTag(*slot, bytes, done - inOffset_);
    }
    std::span<std::byte> outSlot;
    if (out) links_.waitUntil([&] { return !(outSlot = out->reserve()).empty(); }, next_);

    size_t n = std::min(bytes - done, outPiece);
    if (in) {
      const size_t left = slot->data.size() - inOffset_;
      if (left > bytes - done) {
        throw Error(loomRemoteError, links_.what() + ": rank " + std::to_string(prev_) + " sent a malformed slot");
      }
      n = std::min(n, left);
    }
    const std::byte* inData = in ? slot->data.data() + inOffset_ : nullptr;
    // A piece that comes in is computed once: into dst when it goes there
    // (and is sent from there), else into the outgoing slot. One that does
    // not is src's own, sent first and copied to dst after.
    const std::byte* piece = nullptr;
    if (!in) {
      piece = src + done;
    } else {
      std::byte* into = out && !(flow & kCopy) ? outSlot.data() : dst + done;
      if (flow & kReduce) {
        const std::array<const void*, 2> sources{inData, src + done};
        cpu::reduce(call_.type, call_.op, sources, into, n / call_.typeSize);
      } else if (into != inData) {  // else it landed there (receiveInto)
        copyBytes(into, inData, n);
      }
      piece = into;
    }
    if (out) {
      const transport::SlotTag pieceTag = tag(bytes, done, n, slots++);
      if (piece == outSlot.data()) out->commit(pieceTag);
      else out->commitFrom({piece, n}, pieceTag);
      out->progress();  // on its way now: the next rank can start on it
    }
    if (!in && (flow & kCopy) && dst + done != piece) copyBytes(dst + done, piece, n);
    if (in) {
      inOffset_ += n;
      if (inOffset_ == slot->data.size()) {
        in->release();
        inOffset_ = 0;
      }
    }
    done += n;
  }
  if (out) out->keepPayloads();  // a socket sends from src and dst, which may change once this returns
}

}  // namespace loom::coll
