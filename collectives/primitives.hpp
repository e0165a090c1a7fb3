// NCCL's primitive vocabulary, on the CPU: each primitive moves `bytes` bytes
// (any multiple of the element size) from the previous rank, the caller's
// buffers and to the next rank, slot by slot through the collective
// channel's FIFOs, reducing straight out of the received slot into the
// outgoing one. Blocking: it returns when its last slot has been committed
// (sends) or consumed (receives).
//
//   send(src)                      next <- src
//   recv(dst)                      dst  <- prev
//   recvReduceSend(src)            next <- prev (+) src
//   recvReduceCopy(src, dst)       dst  <- prev (+) src
//   recvReduceCopySend(src, dst)   dst, next <- prev (+) src
//   recvCopySend(dst)              dst, next <- prev
//   copySend(src, dst)             dst, next <- src
//   sendRecv(src, dst)             next <- src while dst <- prev (an exchange:
//                                  neither side waits for the other to finish;
//                                  src and dst must not overlap)
//
// Sockets send straight from src and dst and receive straight into dst where
// nothing else is done with what arrives (SendConnection::commitFrom,
// RecvConnection::receiveInto).
//
// Every slot carries the size of the primitive's message, its offset there,
// the collective's sequence number and call signature; a receiver that
// expected something else (ranks in different collectives, or with different
// counts, types, ops or roots) fails with loomInvalidUsage naming both calls
// instead of reducing garbage (comm/engine/message_match.hpp).
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "collectives/cpu/reduce.hpp"
#include "collectives/links.hpp"
#include "transport/connection.hpp"

namespace loom::coll {

class Primitives {
 public:
  // prev or next may be -1 where a rank has none (the ends of a chain).
  // `sequence` and `call` name the collective in every slot (call_signature.hpp).
  Primitives(Links& links, int prev, int next, loomDataType_t type, size_t typeSize, cpu::ReduceOp op,
             uint32_t sequence, uint32_t call);

  void send(const std::byte* src, size_t bytes);
  void recv(std::byte* dst, size_t bytes);
  void recvReduceSend(const std::byte* src, size_t bytes);
  void recvReduceCopy(const std::byte* src, std::byte* dst, size_t bytes);
  void recvReduceCopySend(const std::byte* src, std::byte* dst, size_t bytes);
  void recvCopySend(std::byte* dst, size_t bytes);
  void copySend(const std::byte* src, std::byte* dst, size_t bytes);
  void sendRecv(const std::byte* src, std::byte* dst, size_t bytes);

 private:
  enum Flow : unsigned { kRecv = 1, kReduce = 2, kCopy = 4, kSend = 8 };
  void run(unsigned flow, const std::byte* src, std::byte* dst, size_t bytes);
  // Throws unless the slot is the one at `offset` of a message of `bytes` of this collective.
  void checkTag(const transport::RecvSlot& slot, size_t bytes, size_t offset) const;
  transport::SlotTag tag(size_t bytes, size_t offset, size_t payload, uint32_t index) const;

  Links& links_;
  int prev_;
  int next_;
  loomDataType_t type_;
  size_t typeSize_;
  cpu::ReduceOp op_;
  uint32_t sequence_;
  uint32_t call_;
  size_t inOffset_ = 0;  // bytes of the current inbound slot already consumed
};

}  // namespace loom::coll
