// The primitives (primitives.hpp) on a CPU thread: one loop per primitive
// over the collective channel's connections, blocking in the links' one wait
// loop. Pieces are cut to the outgoing FIFO's slot; a piece that comes in is
// reduced once, straight from the received slot into the outgoing slot or
// the destination, and sent from there. Sockets send straight from src and
// dst and receive straight into dst where nothing else is done with what
// arrives (SendConnection::commitFrom, RecvConnection::receiveInto). Slots
// must be memory this thread reaches (a connection's slotKind()).
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/links.hpp"
#include "collectives/primitives.hpp"
#include "transport/connection.hpp"

namespace loom::coll {

class HostPrimitives final : public Primitives {
 public:
  // prev or next may be -1 where a rank has none (the ends of a chain).
  HostPrimitives(Links& links, int prev, int next, const PrimitiveCall& call);

  void send(const std::byte* src, size_t bytes) override;
  void recv(std::byte* dst, size_t bytes) override;
  void recvReduceSend(const std::byte* src, size_t bytes) override;
  void recvReduceCopy(const std::byte* src, std::byte* dst, size_t bytes) override;
  void recvReduceCopySend(const std::byte* src, std::byte* dst, size_t bytes) override;
  void recvCopySend(std::byte* dst, size_t bytes) override;
  void copySend(const std::byte* src, std::byte* dst, size_t bytes) override;
  void sendRecv(const std::byte* src, std::byte* dst, size_t bytes) override;

 private:
  enum Flow : unsigned { kRecv = 1, kReduce = 2, kCopy = 4, kSend = 8 };
  void run(unsigned flow, const std::byte* src, std::byte* dst, size_t bytes);
  // The connections, checked to hold host-reachable slots.
  transport::SendConnection& out();
  transport::RecvConnection& in();
  // Throws unless the slot is the one at `offset` of a message of `bytes` of this collective.
  void checkTag(const transport::RecvSlot& slot, size_t bytes, size_t offset) const;
  transport::SlotTag tag(size_t bytes, size_t offset, size_t payload, uint32_t index) const;

  Links& links_;
  int prev_;
  int next_;
  PrimitiveCall call_;
  size_t inOffset_ = 0;  // bytes of the current inbound slot already consumed
};

}  // namespace loom::coll
