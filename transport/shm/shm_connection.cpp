#include "transport/shm/shm_connection.hpp"

#include "base/error.hpp"

namespace loom::transport::shm {

ShmSendConnection::ShmSendConnection(::loom::shm::Segment segment, FifoShape shape, net::Socket control)
    : segment_(std::move(segment)), fifo_(segment_.data(), shape), control_(std::move(control)) {}

std::span<std::byte> ShmSendConnection::reserve() {
  const uint32_t slots = fifo_.shape().slots;
  if (head_ - cachedTail_ >= slots) {
    cachedTail_ = fifo_.control().tail.load(std::memory_order_acquire);
    if (head_ - cachedTail_ >= slots) return {};
  }
  return {fifo_.slot(head_), fifo_.shape().slotBytes};
}

void ShmSendConnection::commit(SlotTag tag) {
  tag.sequence = static_cast<uint32_t>(head_);
  fifo_.tag(head_) = tag;
  fifo_.control().head.store(++head_, std::memory_order_release);
}

bool ShmSendConnection::takesHandles() const {
  return fifo_.control().refusesHandles.load(std::memory_order_acquire) == 0;
}

uint64_t ShmSendConnection::slotsReleased() const { return fifo_.control().tail.load(std::memory_order_acquire); }

void ShmSendConnection::offerHandle(uint64_t slot) {
  fifo_.control().handle.store(slot * 4 + kHandleOffered, std::memory_order_release);
}

bool ShmSendConnection::withdrawHandle(uint64_t slot) {
  uint64_t offered = slot * 4 + kHandleOffered;
  return fifo_.control().handle.compare_exchange_strong(offered, slot * 4 + kHandleWithdrawn,
                                                        std::memory_order_acq_rel) ||
         offered == slot * 4 + kHandleWithdrawn;
}

void ShmSendConnection::checkAlive() {
  // A peer that took every slot and left finished its part before this rank.
  if (fifo_.control().tail.load(std::memory_order_acquire) == head_) return;
  if (control_.peerClosed()) throw Error(loomRemoteError, control_.label() + " closed the connection or died");
}

ShmRecvConnection::ShmRecvConnection(::loom::shm::Segment segment, FifoShape shape, net::Socket control)
    : segment_(std::move(segment)), fifo_(segment_.data(), shape), control_(std::move(control)) {}

std::optional<RecvSlot> ShmRecvConnection::peek() {
  if (tail_ == cachedHead_) {
    cachedHead_ = fifo_.control().head.load(std::memory_order_acquire);
    if (tail_ == cachedHead_) return std::nullopt;
  }
  SlotTag tag = fifo_.tag(tail_);
  if (tag.bytes > fifo_.shape().slotBytes || tag.sequence != static_cast<uint32_t>(tail_)) {
    throw Error(loomRemoteError, "corrupt slot " + std::to_string(tail_) + " from " + control_.label());
  }
  return RecvSlot{{fifo_.slot(tail_), tag.bytes}, tag};
}

void ShmRecvConnection::release() { fifo_.control().tail.store(++tail_, std::memory_order_release); }

void ShmRecvConnection::refuseHandles() { fifo_.control().refusesHandles.store(1, std::memory_order_release); }

bool ShmRecvConnection::takeHandle() {
  uint64_t offered = tail_ * 4 + kHandleOffered;
  return fifo_.control().handle.compare_exchange_strong(offered, tail_ * 4 + kHandleTaken, std::memory_order_acq_rel);
}

void ShmRecvConnection::checkAlive() {
  if (!control_.peerClosed()) return;
  // Slots committed before the peer left are still ours to read.
  if (fifo_.control().head.load(std::memory_order_acquire) != tail_) return;
  throw Error(loomRemoteError, control_.label() + " closed the connection or died");
}

}  // namespace loom::transport::shm
