#include "collectives/primitives.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "base/copy_bytes.hpp"
#include "base/error.hpp"
#include "collectives/call_signature.hpp"
#include "comm/engine/message_match.hpp"

namespace loom::coll {

Primitives::Primitives(Links& links, int prev, int next, loomDataType_t type, size_t typeSize, cpu::ReduceOp op,
                       uint32_t sequence, uint32_t call)
    : links_(links),
      prev_(prev),
      next_(next),
      type_(type),
      typeSize_(typeSize),
      op_(op),
      sequence_(sequence),
      call_(call) {}

void Primitives::send(const std::byte* src, size_t bytes) { run(kSend, src, nullptr, bytes); }
void Primitives::recv(std::byte* dst, size_t bytes) { run(kRecv | kCopy, nullptr, dst, bytes); }
void Primitives::recvReduceSend(const std::byte* src, size_t bytes) { run(kRecv | kReduce | kSend, src, nullptr, bytes); }
void Primitives::recvReduceCopy(const std::byte* src, std::byte* dst, size_t bytes) {
  run(kRecv | kReduce | kCopy, src, dst, bytes);
}
void Primitives::recvReduceCopySend(const std::byte* src, std::byte* dst, size_t bytes) {
  run(kRecv | kReduce | kCopy | kSend, src, dst, bytes);
}
void Primitives::recvCopySend(std::byte* dst, size_t bytes) { run(kRecv | kCopy | kSend, nullptr, dst, bytes); }
void Primitives::copySend(const std::byte* src, std::byte* dst, size_t bytes) {
  run(kCopy | kSend, src, dst, bytes);
}

void Primitives::checkTag(const transport::RecvSlot& slot, size_t bytes, size_t offset) const {
  requireMatch(slot.tag, {bytes, sequence_, call_, describeCollectiveMessage}, offset, prev_, links_.what());
  if (slot.data.size() % typeSize_ != 0) {
    throw Error(loomRemoteError, links_.what() + ": rank " + std::to_string(prev_) + " sent a slot of " +
                                     std::to_string(slot.data.size()) + " bytes, not whole elements");
  }
}

transport::SlotTag Primitives::tag(size_t bytes, size_t offset, size_t payload, uint32_t index) const {
  return {.messageBytes = bytes,
          .offset = offset,
          .bytes = static_cast<uint32_t>(payload),
          .message = sequence_,
          .index = index,
          .call = call_};
}

void Primitives::sendRecv(const std::byte* src, std::byte* dst, size_t bytes) {
  if (bytes == 0) return;
  transport::SendConnection& out = links_.to(next_);  // first: see run()
  transport::RecvConnection& in = links_.from(prev_);
  const size_t outPiece = out.slotBytes() - out.slotBytes() % typeSize_;
  const transport::ReceiveInto direct(in, {dst, bytes}, sequence_);
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
void Primitives::run(unsigned flow, const std::byte* src, std::byte* dst, size_t bytes) {
  if (bytes == 0) return;
  // Connect out first: connecting needs only the peer's listener, while
  // from() waits for the peer to connect, and two ranks that each waited for
  // the other to connect first would wait forever.
  transport::SendConnection* out = (flow & kSend) ? &links_.to(next_) : nullptr;
  transport::RecvConnection* in = (flow & kRecv) ? &links_.from(prev_) : nullptr;
  const size_t outPiece = out ? out->slotBytes() - out->slotBytes() % typeSize_ : bytes;
  if (outPiece == 0) throw Error(loomInternalError, "a FIFO slot is smaller than one element");
  // What only lands in dst may land there straight from the network.
  std::optional<transport::ReceiveInto> direct;
  if (in && (flow & kCopy) && !(flow & kReduce)) direct.emplace(*in, std::span(dst, bytes), sequence_);

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
        cpu::reduce(type_, op_, sources, into, n / typeSize_);
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
