// NCCL's primitive vocabulary: what an algorithm file says to move data
// between ring (or tree, or pair) neighbours. Each primitive moves `bytes`
// bytes (any multiple of the element size) from the previous rank, the
// caller's buffers and to the next rank, slot by slot through the collective
// channel's FIFOs, reducing straight out of the received slot into the
// outgoing one. It returns when its last slot has been committed (sends) or
// consumed (receives).
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
// This is an interface: an executor (executor.hpp) implements it for the
// memory it reaches. The host executor (cpu/host_primitives) runs it on the
// calling CPU thread; a CUDA executor implements the same calls inside a
// kernel, as NCCL's runRing reads the same for every protocol, so an
// algorithm file is written once.
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

#include "collectives/cpu/reduce.hpp"

namespace loom::coll {

// What one collective's primitives all share: the elements they move, how
// they combine, and what every slot they send says of the call.
struct PrimitiveCall {
  loomDataType_t type = loomFloat32;
  size_t typeSize = 4;
  cpu::ReduceOp op = cpu::ReduceOp::Sum;
  uint32_t sequence = 0;  // the collective's number (call_signature.hpp)
  uint32_t call = 0;      // its signature
};

class Primitives {
 public:
  virtual ~Primitives() = default;

  virtual void send(const std::byte* src, size_t bytes) = 0;
  virtual void recv(std::byte* dst, size_t bytes) = 0;
  virtual void recvReduceSend(const std::byte* src, size_t bytes) = 0;
  virtual void recvReduceCopy(const std::byte* src, std::byte* dst, size_t bytes) = 0;
  virtual void recvReduceCopySend(const std::byte* src, std::byte* dst, size_t bytes) = 0;
  virtual void recvCopySend(std::byte* dst, size_t bytes) = 0;
  virtual void copySend(const std::byte* src, std::byte* dst, size_t bytes) = 0;
  virtual void sendRecv(const std::byte* src, std::byte* dst, size_t bytes) = 0;
};

}  // namespace loom::coll
