// The two ends of a UCX connection. Each end keeps its FIFO of slots in its
// own memory; a slot travels as one tagged message, its payload followed by
// its 40-byte SlotTag (so the payload stays aligned at the slot's start),
// tagged with its slot number (modulo 2^64), sent eagerly (ucp.cpp), into
// the receive posted for it: the receiver has one posted into each free slot.
//
// Credits come back on the handshake's control socket, which stays open
// anyway to tell either end that the other is gone (on one host UCX does
// not, ucp.hpp): the receiver writes how many slots it has released (a u64)
// as it releases them, so a sender runs ahead by at most the FIFO's slots
// and nothing waits in UCX's unexpected queue. While full slots stream it
// writes one per slot, which keeps a large message's window full (with eight
// slots a 16 MiB sendrecv across namespaces moved as much as with sixteen
// and credits per half FIFO, bench/RESULTS.md, 2026-11-26, night); after
// short slots, one per half FIFO. Credits could go over UCX too, but an
// endpoint back to the sender must be wired up and flushed, and the two
// ends' teardown would then wait for each other.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "base/cancellation.hpp"
#include "base/net/socket.hpp"
#include "transport/connection.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/drainer.hpp"
#include "transport/ucx/ucp.hpp"

namespace loom::transport::ucx {

// One end's FIFO: `slots` slots of slotBytes and a SlotTag each.
class SlotStorage {
 public:
  explicit SlotStorage(const FifoShape& shape)
      : stride_(shape.slotBytes + sizeof(SlotTag)),
        slots_(shape.slots),
        bytes_(std::make_unique_for_overwrite<std::byte[]>(slots_ * stride_)) {}
  std::byte* operator[](uint64_t slot) { return bytes_.get() + (slot % slots_) * stride_; }

 private:
  size_t stride_;
  size_t slots_;
  std::unique_ptr<std::byte[]> bytes_;  // not zeroed: a page costs nothing until a slot lands in it
};

class UcxSendConnection final : public SendConnection {
 public:
  // `cancel`: the communicator's; once it fires nothing sent is worth a flush.
  // `drainer` writes out what UCX holds of finished sends while this
  // connection is not in use (drainer.hpp).
  UcxSendConnection(std::unique_ptr<Worker> worker, net::Socket control, FifoShape shape, const Cancellation* cancel,
                    std::shared_ptr<Drainer> drainer);
  ~UcxSendConnection() override;

  memory::MemoryKind slotKind() const override { return memory::MemoryKind::Host; }
  size_t slotBytes() const override { return shape_.slotBytes; }
  std::span<std::byte> reserve() override;
  void commit(SlotTag tag) override;
  bool progress() override;
  bool flushed() const override { return inFlight_ == 0; }
  void checkAlive() override;
  void addWaitFds(std::vector<WaitFd>& out) const override;
  const std::string& peerName() const override { return control_.label(); }

 private:
  // True if a send finished.
  bool reapSends();
  // Takes in the credits that have come; true if any did.
  bool readCredits();

  FifoShape shape_;
  net::Socket control_;
  SlotStorage storage_;
  std::vector<void*> sends_;        // each slot's send, until it completes
  uint64_t head_ = 0;               // slots committed
  uint64_t credited_ = 0;           // slots the receiver has released
  size_t inFlight_ = 0;             // sends not complete
  uint64_t credit_ = 0;             // the credit being read, creditBytes_ of it so far
  size_t creditBytes_ = 0;
  std::string closed_;              // why the control socket ended, once it has
  const Cancellation* cancel_;
  std::shared_ptr<Drainer> drainer_;
  std::unique_ptr<Worker> worker_;  // last: it goes first, before the buffers its requests point into
};

class UcxRecvConnection final : public RecvConnection {
 public:
  UcxRecvConnection(std::unique_ptr<Worker> worker, net::Socket control, FifoShape shape);
  ~UcxRecvConnection() override;

  memory::MemoryKind slotKind() const override { return memory::MemoryKind::Host; }
  std::optional<RecvSlot> peek() override;
  void release() override;
  bool progress() override;
  void checkAlive() override;
  void addWaitFds(std::vector<WaitFd>& out) const override;
  const std::string& peerName() const override { return control_.label(); }

  // How long slots may still arrive after the control socket closed: the
  // peer flushes before it closes, but the two are different TCP streams.
  static constexpr auto kGrace = std::chrono::milliseconds(500);

 private:
  struct Slot {
    void* request = nullptr;
    bool arrived = false;
    ucp_tag_recv_info_t info{};
  };
  void post(uint64_t slot);
  // True if the oldest unreleased slot has arrived.
  bool oldestArrived();
  // Writes the released count when due, or the rest of the one begun.
  void sendCredit();

  FifoShape shape_;
  net::Socket control_;
  SlotStorage storage_;
  std::vector<Slot> slots_;
  uint64_t tail_ = 0;        // slots released
  uint64_t creditSent_ = 0;  // the released count last written
  bool streaming_ = false;   // the slot released last was full (sendCredit)
  uint64_t credit_ = 0;      // the count being written, creditBytes_ of it so far
  size_t creditBytes_ = sizeof(uint64_t);
  std::optional<std::chrono::steady_clock::time_point> closedAt_;
  std::unique_ptr<Worker> worker_;  // last (UcxSendConnection)
};

}  // namespace loom::transport::ucx
