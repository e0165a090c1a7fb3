// One direction of a connection between two ranks: a FIFO of slots.
//
// The sender reserves a free slot, writes up to slotBytes() into it and
// commits it; the receiver peeks at the oldest filled slot, reads (or reduces)
// straight from it and releases it. Head (slots committed) and tail (slots
// released) are the credits: the sender runs ahead of the receiver by at most
// slots() slots, so a large message pipelines chunk by chunk.
//
// Every slot carries a SlotTag; the engine uses it to check that a message's
// size is what the receiver expects. Transports that move bytes with the CPU
// (sockets) do it in progress(); shared memory needs no progress at all; UCX
// sends each slot as a tagged message and progress() drives its worker. The
// one-sided verbs transport commits with an RDMA write of the slot and its
// tag into the peer's registered FIFO, and progress() polls its completion
// queue.
//
// Failures throw loom::Error naming the peer: loomRemoteError when the peer
// closed, reset or died.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memory/memory_kind.hpp"

namespace loom::transport {

// Travels with every slot (40 bytes, sent as they lie in memory).
struct SlotTag {
  uint64_t messageBytes = 0;  // size of the whole message this chunk belongs to
  uint64_t offset = 0;        // of this slot's payload in the message
  uint32_t bytes = 0;         // payload bytes in this slot
  uint32_t sequence = 0;      // slot number modulo 2^32: set by the transport, checked by the receiver
  uint32_t message = 0;       // the sender's message id (a collective's sequence number; 0 for point-to-point)
  uint32_t index = 0;         // this slot's number in the message (0: its first)
  uint32_t call = 0;          // what the sender is calling, opaque here (the collectives' call signature; 0: point-to-point)
  uint32_t flags = 0;         // kSlotHoldsHandle, or 0 (also keeps the tag free of padding on the wire)
};

// The slot holds no payload but a memory::Handle of the sender's buffer, the
// whole message, for the receiver to copy from (SendConnection::takesHandles).
inline constexpr uint32_t kSlotHoldsHandle = 1;

// A slot's bytes are in the memory its connection's slotKind() names: host
// memory for sockets and shared memory, device memory for a FIFO that a
// CUDA IPC connection keeps on the GPU. Whatever touches them must reach
// that kind (requireHostSlots for a CPU thread).
struct RecvSlot {
  std::span<const std::byte> data;  // tag.bytes bytes
  SlotTag tag;
};

// What a waiting thread may poll() on instead of spinning: fds whose
// readiness means this connection can move (sockets), or one that only turns
// readable when the peer dies (the control socket of shared memory).
struct WaitFd {
  int fd = -1;
  short events = 0;
};

class SendConnection {
 public:
  virtual ~SendConnection() = default;

  virtual size_t slotBytes() const = 0;
  // Where the slots live (RecvSlot).
  virtual memory::MemoryKind slotKind() const = 0;
  // The next free slot (slotBytes() long), or an empty span when every slot is in flight.
  virtual std::span<std::byte> reserve() = 0;
  // Publishes the reserved slot with tag.bytes bytes of payload.
  virtual void commit(SlotTag tag) = 0;
  // Publishes the reserved slot with `data` (tag.bytes bytes) as its payload.
  // A transport that copies in progress() anyway (sockets) sends straight
  // from `data`, which must then stay as it is until flushed() or
  // keepPayloads(); the others copy it into the slot (this default).
  virtual void commitFrom(std::span<const std::byte> data, SlotTag tag);
  // Copies what commitFrom left in the caller's memory and is not sent yet
  // into the FIFO, so the caller may change that memory now (without waiting
  // for a peer that may be waiting for this rank).
  virtual void keepPayloads() {}
  // Moves bytes where the transport needs the CPU to; true if anything moved.
  virtual bool progress() = 0;
  // True once every committed slot has left this process (the peer can get it
  // without this rank's help).
  virtual bool flushed() const = 0;
  // Throws loomRemoteError if the peer is known to be gone while slots
  // committed here still need it. A peer that took everything and left has
  // only finished its part first: its slower peers must still finish theirs.
  virtual void checkAlive() = 0;
  virtual void addWaitFds(std::vector<WaitFd>& out) const = 0;
  virtual const std::string& peerName() const = 0;

  // Messages by handle (kSlotHoldsHandle), where the peer is on this node
  // and may map this rank's memory (shared memory's connections): whether
  // the receiver still takes them (it refuses for good once it cannot map
  // one, having released that slot unread), and the slots committed and
  // released so far, by which the sender sees its handle's slot released:
  // the receiver has copied the message, or refused it.
  virtual bool takesHandles() const { return false; }
  virtual uint64_t slotsCommitted() const { return 0; }
  virtual uint64_t slotsReleased() const { return 0; }
  // The one handle in flight, by slot number: offered before its slot is
  // committed; withdrawn by a sender that gives up on the message, which
  // succeeds unless the receiver has taken it (RecvConnection::takeHandle)
  // and may be reading the sender's buffer until it releases the slot.
  virtual void offerHandle(uint64_t /*slot*/) {}
  virtual bool withdrawHandle(uint64_t /*slot*/) { return true; }
};

class RecvConnection {
 public:
  virtual ~RecvConnection() = default;

  // Where the slots live (RecvSlot).
  virtual memory::MemoryKind slotKind() const = 0;
  // The oldest committed slot not yet released, or nothing yet.
  virtual std::optional<RecvSlot> peek() = 0;
  // Returns the slot peek() showed to the sender (one credit).
  virtual void release() = 0;
  // The message that begins at the oldest unreleased slot, `id` and
  // message.size() bytes long, may land straight in `message`: a transport
  // that receives with the CPU (sockets) puts each payload whose slot has not
  // begun to arrive at its offset there, and peek() shows it in place; the
  // others ignore this. An empty span ends it, before `message` goes (ReceiveInto).
  virtual void receiveInto(std::span<std::byte> /*message*/, uint32_t /*id*/) {}
  virtual bool progress() = 0;
  // This rank cannot map the sender's handles: the sender sends bytes from
  // now on (SendConnection::takesHandles). Call before releasing the slot.
  virtual void refuseHandles() {}
  // Before reading through the handle in the oldest unreleased slot: false
  // if the sender has withdrawn it (its buffer may be gone), else the
  // sender now waits for the slot's release before it lets the buffer go.
  virtual bool takeHandle() { return true; }
  // Throws loomRemoteError if the peer is known to be gone and every slot it
  // committed has been released here.
  virtual void checkAlive() = 0;
  virtual void addWaitFds(std::vector<WaitFd>& out) const = 0;
  virtual const std::string& peerName() const = 0;
};

// Throws loomInternalError naming the peer unless a CPU thread can read and
// write slots of `kind`: what the host's progress engine and executor check
// before they touch a connection's slots.
void requireHostSlots(memory::MemoryKind kind, const std::string& peer);

// Points `connection` at `message` for as long as it lives (receiveInto).
class ReceiveInto {
 public:
  ReceiveInto(RecvConnection& connection, std::span<std::byte> message, uint32_t id) : connection_(connection) {
    connection_.receiveInto(message, id);
  }
  ~ReceiveInto() { connection_.receiveInto({}, 0); }
  ReceiveInto(const ReceiveInto&) = delete;
  ReceiveInto& operator=(const ReceiveInto&) = delete;

 private:
  RecvConnection& connection_;
};

}  // namespace loom::transport
