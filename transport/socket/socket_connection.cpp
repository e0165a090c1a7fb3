#include "transport/socket/socket_connection.hpp"

#include <poll.h>

#include <cstring>

#include "base/error.hpp"

namespace loom::transport::sock {
namespace {

constexpr size_t kTagBytes = sizeof(SlotTag);
static_assert(kTagBytes == 40);

std::span<const std::byte> tagBytes(const SlotTag& tag) { return std::as_bytes(std::span(&tag, 1)); }

}  // namespace

SocketSendConnection::SocketSendConnection(std::vector<net::Socket> sockets, FifoShape shape, std::string peerName)
    : shape_(shape),
      peerName_(std::move(peerName)),
      storage_(std::make_unique_for_overwrite<std::byte[]>(shape.totalBytes())),
      tags_(shape.slots),
      payloads_(shape.slots, nullptr),
      sent_(shape.slots, 0) {
  for (size_t i = 0; i < sockets.size(); ++i) lanes_.push_back(Lane{.socket = std::move(sockets[i]), .slot = i, .offset = 0});
}

std::span<std::byte> SocketSendConnection::reserve() {
  if (head_ - tail_ >= shape_.slots) return {};
  return {slotData(head_), shape_.slotBytes};
}

void SocketSendConnection::commit(SlotTag tag) { commitFrom({slotData(head_), tag.bytes}, tag); }

void SocketSendConnection::commitFrom(std::span<const std::byte> data, SlotTag tag) {
  tag.sequence = static_cast<uint32_t>(head_);
  tags_[head_ % shape_.slots] = tag;
  payloads_[head_ % shape_.slots] = data.data();
  ++head_;
}

void SocketSendConnection::keepPayloads() {
  for (uint64_t slot = tail_; slot < head_; ++slot) {
    const size_t index = slot % shape_.slots;
    std::byte* own = slotData(slot);
    if (sent_[index] || payloads_[index] == own || tags_[index].bytes == 0) continue;
    std::memcpy(own, payloads_[index], tags_[index].bytes);  // a lane part-way through it goes on from its offset
    payloads_[index] = own;
  }
}

bool SocketSendConnection::advance(Lane& lane) {
  bool moved = false;
  while (lane.slot < head_) {
    const size_t index = lane.slot % shape_.slots;
    const SlotTag& tag = tags_[index];
    auto head = tagBytes(tag);
    std::span<const std::byte> body(payloads_[index], tag.bytes);
    size_t n = lane.offset < kTagBytes ? lane.socket.sendSome(head.subspan(lane.offset), body)
                                       : lane.socket.sendSome({}, body.subspan(lane.offset - kTagBytes));
    lane.offset += n;
    moved |= n > 0;
    if (lane.offset < kTagBytes + tag.bytes) break;  // kernel buffer full
    sent_[index] = 1;
    lane.slot += lanes_.size();
    lane.offset = 0;
  }
  return moved;
}

bool SocketSendConnection::progress() {
  bool moved = false;
  for (auto& lane : lanes_) moved |= advance(lane);
  while (tail_ < head_ && sent_[tail_ % shape_.slots]) {
    sent_[tail_ % shape_.slots] = 0;
    ++tail_;
  }
  return moved;
}

void SocketSendConnection::checkAlive() {
  if (flushed()) return;  // all of it is the peer's kernel's, or the peer's: it needs nothing more of us
  for (const auto& lane : lanes_) {
    if (lane.socket.peerClosed()) throw Error(loomRemoteError, peerName_ + " closed the connection or died");
  }
}

void SocketSendConnection::addWaitFds(std::vector<WaitFd>& out) const {
  for (const auto& lane : lanes_) out.push_back({lane.socket.fd(), static_cast<short>(lane.slot < head_ ? POLLOUT : POLLIN)});
}

SocketRecvConnection::SocketRecvConnection(std::vector<net::Socket> sockets, FifoShape shape, std::string peerName)
    : shape_(shape),
      peerName_(std::move(peerName)),
      storage_(std::make_unique_for_overwrite<std::byte[]>(shape.totalBytes())),
      tags_(shape.slots),
      payloads_(shape.slots, nullptr),
      ready_(shape.slots, 0) {
  for (size_t i = 0; i < sockets.size(); ++i) {
    Lane lane;
    lane.socket = std::move(sockets[i]);
    lane.slot = i;
    lanes_.push_back(std::move(lane));
  }
}

bool SocketRecvConnection::advance(Lane& lane) {
  bool moved = false;
  while (lane.closed.empty() && lane.slot < tail_ + shape_.slots) {
    size_t n = 0;
    try {
      if (lane.offset < kTagBytes) {
        n = lane.socket.recvSome(std::as_writable_bytes(std::span(&lane.tag, 1)).subspan(lane.offset));
      } else {
        std::span<std::byte> body(lane.body, lane.tag.bytes);
        n = lane.socket.recvSome(body.subspan(lane.offset - kTagBytes));
      }
    } catch (const Error& e) {
      if (e.code() != loomRemoteError || lane.offset != 0) throw;
      lane.closed = e.what();  // closed between slots: what came before is still ours to read
      break;
    }
    if (n == 0) break;
    moved = true;
    const bool tagDone = lane.offset < kTagBytes && lane.offset + n == kTagBytes;
    lane.offset += n;
    if (tagDone && (lane.tag.bytes > shape_.slotBytes || lane.tag.sequence != static_cast<uint32_t>(lane.slot))) {
      throw Error(loomRemoteError, "corrupt slot " + std::to_string(lane.slot) + " from " + peerName_);
    }
    if (tagDone) lane.body = bodyOf(lane);
    if (lane.offset < kTagBytes || lane.offset < kTagBytes + lane.tag.bytes) continue;
    const size_t index = lane.slot % shape_.slots;
    tags_[index] = lane.tag;
    payloads_[index] = lane.body;
    ready_[index] = 1;
    lane.slot += lanes_.size();
    lane.offset = 0;
  }
  return moved;
}

bool SocketRecvConnection::progress() {
  bool moved = false;
  for (auto& lane : lanes_) moved |= advance(lane);
  return moved;
}

std::optional<RecvSlot> SocketRecvConnection::peek() {
  const size_t index = tail_ % shape_.slots;
  if (!ready_[index]) return std::nullopt;
  return RecvSlot{{payloads_[index], tags_[index].bytes}, tags_[index]};
}

void SocketRecvConnection::receiveInto(std::span<std::byte> message, uint32_t id) {
  // What still lies in the old message, or is on its way there, moves into
  // the FIFO first: its owner may reuse it once this returns.
  const auto inOld = [&](const std::byte* p) {
    return !into_.empty() && p >= into_.data() && p < into_.data() + into_.size();
  };
  for (uint64_t slot = tail_; slot < tail_ + shape_.slots; ++slot) {
    const size_t index = slot % shape_.slots;
    if (!ready_[index] || !inOld(payloads_[index])) continue;
    std::memcpy(slotData(slot), payloads_[index], tags_[index].bytes);
    payloads_[index] = slotData(slot);
  }
  for (auto& lane : lanes_) {
    if (lane.offset < kTagBytes || !inOld(lane.body)) continue;
    std::memcpy(slotData(lane.slot), lane.body, lane.offset - kTagBytes);
    lane.body = slotData(lane.slot);
  }
  into_ = message;
  intoId_ = id;
  intoFirst_ = tail_;
}

// The message's own slots only: the next message may have the same id and
// size (a ring's steps), and its first slot comes on some lane while this
// one's last is still on another.
std::byte* SocketRecvConnection::bodyOf(const Lane& lane) {
  const SlotTag& tag = lane.tag;
  const bool ours = !into_.empty() && tag.message == intoId_ && tag.messageBytes == into_.size() &&
                    lane.slot >= intoFirst_ && lane.slot - intoFirst_ == tag.index && tag.offset <= into_.size() &&
                    tag.bytes <= into_.size() - tag.offset;
  return ours ? into_.data() + tag.offset : slotData(lane.slot);
}

void SocketRecvConnection::release() {
  ready_[tail_ % shape_.slots] = 0;
  ++tail_;
}

void SocketRecvConnection::checkAlive() {
  if (ready_[tail_ % shape_.slots]) return;
  const Lane& next = lanes_[tail_ % lanes_.size()];
  if (!next.closed.empty()) throw Error(loomRemoteError, next.closed);
}

void SocketRecvConnection::addWaitFds(std::vector<WaitFd>& out) const {
  for (const auto& lane : lanes_) {
    if (lane.closed.empty()) out.push_back({lane.socket.fd(), POLLIN});
  }
}

}  // namespace loom::transport::sock
