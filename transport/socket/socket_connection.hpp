// The two ends of a TCP connection: each end keeps its own FIFO of slots in
// local memory and the bytes travel over N sockets ("lanes"): slot i goes on
// lane i mod N as a 40-byte SlotTag followed by its payload, so consecutive
// slots of a large message move in parallel. TCP's flow control carries the
// credits: a receiver whose slots are full stops reading, the sender's kernel
// buffer fills, and its slots stay in flight.
//
// Byte order on the wire is the host's: all ranks of a job share an
// architecture.
#pragma once

#include <memory>
#include <vector>

#include "base/net/socket.hpp"
#include "transport/connection.hpp"
#include "transport/transport.hpp"

namespace loom::transport::sock {

class SocketSendConnection final : public SendConnection {
 public:
  SocketSendConnection(std::vector<net::Socket> sockets, FifoShape shape, std::string peerName);

  memory::MemoryKind slotKind() const override { return memory::MemoryKind::Host; }
  size_t slotBytes() const override { return shape_.slotBytes; }
  std::span<std::byte> reserve() override;
  void commit(SlotTag tag) override;
  // Sends from `data` itself: no copy into the FIFO.
  void commitFrom(std::span<const std::byte> data, SlotTag tag) override;
  void keepPayloads() override;
  bool progress() override;
  bool flushed() const override { return tail_ == head_; }
  void checkAlive() override;
  void addWaitFds(std::vector<WaitFd>& out) const override;
  const std::string& peerName() const override { return peerName_; }

 private:
  struct Lane {
    net::Socket socket;
    uint64_t slot;      // the next slot this lane carries
    size_t offset = 0;  // bytes of it (tag, then payload) already sent
  };
  bool advance(Lane& lane);
  std::byte* slotData(uint64_t slot) { return storage_.get() + (slot % shape_.slots) * size_t{shape_.slotBytes}; }

  FifoShape shape_;
  std::string peerName_;
  std::unique_ptr<std::byte[]> storage_;  // not zeroed: a page costs nothing until a slot carries bytes
  std::vector<SlotTag> tags_;
  std::vector<const std::byte*> payloads_;  // each slot's payload: in storage_, or the caller's (commitFrom)
  std::vector<char> sent_;
  std::vector<Lane> lanes_;
  uint64_t head_ = 0;  // slots committed
  uint64_t tail_ = 0;  // slots fully handed to the kernel
};

class SocketRecvConnection final : public RecvConnection {
 public:
  SocketRecvConnection(std::vector<net::Socket> sockets, FifoShape shape, std::string peerName);

  memory::MemoryKind slotKind() const override { return memory::MemoryKind::Host; }
  std::optional<RecvSlot> peek() override;
  void release() override;
  void receiveInto(std::span<std::byte> message, uint32_t id) override;
  bool progress() override;
  void checkAlive() override;
  void addWaitFds(std::vector<WaitFd>& out) const override;
  const std::string& peerName() const override { return peerName_; }

 private:
  struct Lane {
    net::Socket socket;
    uint64_t slot = 0;
    size_t offset = 0;
    SlotTag tag;
    std::byte* body = nullptr;  // where the slot's payload goes: its FIFO slot, or the message (receiveInto)
    std::string closed;         // why the peer's side ended, once it has
  };
  // Where the payload of `lane`'s slot, whose tag has just come, goes.
  std::byte* bodyOf(const Lane& lane);
  bool advance(Lane& lane);
  std::byte* slotData(uint64_t slot) { return storage_.get() + (slot % shape_.slots) * size_t{shape_.slotBytes}; }

  FifoShape shape_;
  std::string peerName_;
  std::unique_ptr<std::byte[]> storage_;  // as the send end's
  std::vector<SlotTag> tags_;
  std::vector<const std::byte*> payloads_;  // of ready slots
  std::vector<char> ready_;
  std::vector<Lane> lanes_;
  uint64_t tail_ = 0;  // slots released
  std::span<std::byte> into_;  // receiveInto's message: it begins at slot intoFirst_
  uint32_t intoId_ = 0;
  uint64_t intoFirst_ = 0;
};

}  // namespace loom::transport::sock
