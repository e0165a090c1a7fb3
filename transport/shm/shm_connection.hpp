// The two ends of a shared-memory connection. The receiver created the
// segment; both map it. The sender writes payload straight into the slot and
// publishes it by advancing head; the receiver reads straight from the slot.
// No progress is needed: a committed slot is visible to the peer at once.
// The peers share a node, so a slot may also hold a handle of the sender's
// device buffer for the receiver to copy from (kSlotHoldsHandle).
//
// The TCP connection that carried the handshake stays open as a control
// socket: it never carries data, so it turning readable means the peer closed
// it or died, which is how a dead peer is noticed without a deadline.
#pragma once

#include <poll.h>

#include "base/net/socket.hpp"
#include "base/shm/segment.hpp"
#include "transport/connection.hpp"
#include "transport/shm/fifo.hpp"

namespace loom::transport::shm {

class ShmSendConnection final : public SendConnection {
 public:
  ShmSendConnection(::loom::shm::Segment segment, FifoShape shape, net::Socket control);

  memory::MemoryKind slotKind() const override { return memory::MemoryKind::HostShared; }
  size_t slotBytes() const override { return fifo_.shape().slotBytes; }
  std::span<std::byte> reserve() override;
  void commit(SlotTag tag) override;
  bool progress() override { return false; }
  bool flushed() const override { return true; }
  void checkAlive() override;
  void addWaitFds(std::vector<WaitFd>& out) const override { out.push_back({control_.fd(), POLLIN}); }
  const std::string& peerName() const override { return control_.label(); }
  bool takesHandles() const override;
  uint64_t slotsCommitted() const override { return head_; }
  uint64_t slotsReleased() const override;
  void offerHandle(uint64_t slot) override;
  bool withdrawHandle(uint64_t slot) override;

 private:
  ::loom::shm::Segment segment_;
  FifoView fifo_;
  net::Socket control_;
  uint64_t head_ = 0;        // our copy of head: we are its only writer
  uint64_t cachedTail_ = 0;  // the receiver's tail when last read
};

class ShmRecvConnection final : public RecvConnection {
 public:
  ShmRecvConnection(::loom::shm::Segment segment, FifoShape shape, net::Socket control);

  memory::MemoryKind slotKind() const override { return memory::MemoryKind::HostShared; }
  std::optional<RecvSlot> peek() override;
  void release() override;
  bool progress() override { return false; }
  void refuseHandles() override;
  bool takeHandle() override;
  void checkAlive() override;
  void addWaitFds(std::vector<WaitFd>& out) const override { out.push_back({control_.fd(), POLLIN}); }
  const std::string& peerName() const override { return control_.label(); }

 private:
  ::loom::shm::Segment segment_;
  FifoView fifo_;
  net::Socket control_;
  uint64_t tail_ = 0;
  uint64_t cachedHead_ = 0;
};

}  // namespace loom::transport::shm
