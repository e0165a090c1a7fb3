// The two ends of a verbs connection (NCCL's IB transport, reduced to one
// FIFO): the receiver's FIFO of slots lives in its registered memory, and
// the sender fills it with RDMA writes, nobody's CPU copying on the way.
//
// A slot is a 64-byte header (the SlotTag, padded so the payload is
// 64-byte aligned) and slotBytes of payload. Committing slot s is one
// RDMA_WRITE_WITH_IMM of header and payload into the peer's slot s mod
// slots, the immediate carrying s: the write lands before its immediate's
// completion (RC's ordering), so a receiver that sees the completion may read
// the slot. Payloads come from the sender's own registered staging slot, or
// straight from a loomMemAlloc buffer that the registration cache holds
// (commitFrom); ordinary memory is copied into the staging slot first.
//
// Credits go back the same way: each release is a zero-length
// RDMA_WRITE_WITH_IMM carrying the count released, into one of the receives
// the sender keeps posted. A sender runs ahead by at most `slots` slots and
// at most `slots` of its writes are unacknowledged, so neither side's
// queues can overflow and no write ever finds no receive posted.
//
// The handshake's socket stays open as the control channel: no data moves on
// it, but its closing tells either end that the other is gone sooner than
// the queue pair's retries would. A completion with an error status (the
// peer stopped answering, the queue pair broke) is loomRemoteError naming
// the peer, the device and the status.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/cancellation.hpp"
#include "base/net/socket.hpp"
#include "transport/connection.hpp"
#include "transport/ibverbs/registration_cache.hpp"
#include "transport/ibverbs/verbs.hpp"
#include "transport/transport.hpp"

namespace loom::transport::ibverbs {

// The SlotTag padded to a cache line: the payload starts 64-byte aligned.
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(SlotTag) <= kHeaderBytes);

// Host memory aligned to a page, owned (registrations want whole pages), not zeroed.
class PageAlignedBytes {
 public:
  explicit PageAlignedBytes(size_t bytes);
  std::byte* data() const { return data_.get(); }
  size_t size() const { return bytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t bytes_;
};

// A FIFO of `slots` slots of kHeaderBytes + slotBytes each, registered.
struct RegisteredFifo {
  RegisteredFifo(Device& device, const FifoShape& shape, bool remoteWrite);
  size_t stride() const { return kHeaderBytes + slotBytes; }
  std::byte* slot(uint64_t s) const { return bytes.data() + (s % slots) * stride(); }

  uint32_t slots;
  uint32_t slotBytes;
  PageAlignedBytes bytes;
  std::unique_ptr<MemoryRegion> region;
};

// Where the receiver's FIFO is, for the sender's writes.
struct RemoteFifo {
  uint64_t address = 0;
  uint32_t rkey = 0;
};

// One end's queue pair and its completion queue. The device goes last: its
// protection domain must outlive every registration and queue pair.
struct QueuePairEnd {
  std::shared_ptr<Device> device;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;

  // `sendDepth` writes and `recvDepth` receives at most outstanding.
  QueuePairEnd(std::shared_ptr<Device> device, int sendDepth, int recvDepth);
  // Posts `count` receives for immediates (the connections repost each as it completes).
  void postReceives(uint32_t count);
  // Up to out.size() completions that have come, every one a success: an
  // error completion becomes `failure` (naming `peer`, this end and the
  // status) and is thrown as loomRemoteError.
  std::span<const Completion> poll(std::span<Completion> out, const std::string& peer, std::string& failure);
  // "fake0:1 qp 0x104": how errors name this end.
  std::string where() const;
};

// What the connections share: the peer's name, the control socket, how long
// a wait may take and what cancels it.
struct Link {
  net::Socket control;
  std::chrono::milliseconds timeout{0};
  const Cancellation* cancel = nullptr;
};

class IbSendConnection final : public SendConnection {
 public:
  // `end`'s queue pair is connected and has `shape.slots` receives posted for credits.
  IbSendConnection(std::shared_ptr<Device> device, std::unique_ptr<RegisteredFifo> staging, std::unique_ptr<QueuePairEnd> end,
                   RemoteFifo remote, std::shared_ptr<RegistrationCache> cache, Link link, FifoShape shape);
  ~IbSendConnection() override;

  memory::MemoryKind slotKind() const override { return memory::MemoryKind::Host; }
  size_t slotBytes() const override { return shape_.slotBytes; }
  std::span<std::byte> reserve() override;
  void commit(SlotTag tag) override;
  // From a loomMemAlloc buffer the device may read in place: no copy.
  void commitFrom(std::span<const std::byte> data, SlotTag tag) override;
  // Waits for the device to have read what commitFrom left in the caller's
  // memory (it needs the peer's device, not the peer's CPU).
  void keepPayloads() override;
  bool progress() override;
  bool flushed() const override { return completed_ == head_; }
  void checkAlive() override;
  void addWaitFds(std::vector<WaitFd>& out) const override;
  const std::string& peerName() const override { return link_.control.label(); }

  // How many receives a sender keeps posted for credits.
  static uint32_t creditReceives(const FifoShape& shape) { return shape.slots; }

 private:
  void post(SlotTag tag, std::span<const Sge> payload);

  std::shared_ptr<Device> device_;
  FifoShape shape_;
  std::unique_ptr<RegisteredFifo> staging_;
  RemoteFifo remote_;
  std::shared_ptr<RegistrationCache> cache_;
  Link link_;
  std::vector<std::shared_ptr<const MemoryRegion>> lent_;  // a slot's user buffer's registration, until its write completes
  uint64_t head_ = 0;       // slots committed (writes posted)
  uint64_t completed_ = 0;  // writes the device has completed
  uint64_t credited_ = 0;   // slots the receiver has released
  uint64_t lentUntil_ = 0;  // writes up to here read the caller's memory
  std::string failure_;
  std::unique_ptr<QueuePairEnd> end_;  // last: its queue pair goes before the buffers it writes from
};

class IbRecvConnection final : public RecvConnection {
 public:
  // `end`'s queue pair is connected and has a receive posted for every slot.
  IbRecvConnection(std::shared_ptr<Device> device, std::unique_ptr<RegisteredFifo> fifo, std::unique_ptr<QueuePairEnd> end,
                   Link link, FifoShape shape);
  ~IbRecvConnection() override;

  memory::MemoryKind slotKind() const override { return memory::MemoryKind::Host; }
  std::optional<RecvSlot> peek() override;
  void release() override;
  bool progress() override;
  void checkAlive() override;
  void addWaitFds(std::vector<WaitFd>& out) const override;
  const std::string& peerName() const override { return link_.control.label(); }

  // How long slots may still complete after the control socket closed.
  static constexpr auto kGrace = std::chrono::milliseconds(500);

 private:
  void sendCredit();

  std::shared_ptr<Device> device_;
  FifoShape shape_;
  std::unique_ptr<RegisteredFifo> fifo_;
  Link link_;
  std::vector<char> arrived_;
  uint64_t received_ = 0;       // slots whose write has landed
  uint64_t tail_ = 0;           // slots released
  uint64_t creditSent_ = 0;     // the released count last written back
  uint32_t creditsInFlight_ = 0;
  std::string failure_;
  std::optional<std::chrono::steady_clock::time_point> closedAt_;
  std::unique_ptr<QueuePairEnd> end_;  // last (IbSendConnection)
};

}  // namespace loom::transport::ibverbs
