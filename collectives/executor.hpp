// Executors: what runs a collective's data movement and arithmetic on the
// memory its buffers are in. An algorithm file is written once, over an
// executor's primitives (primitives.hpp) and its local copy and reduce; the
// executor decides whether that happens on the calling CPU thread (cpu/,
// today's only one) or inside a device kernel with a proxy thread for the
// network (cuda/, later: one block per channel, peers' buffers mapped through
// CUDA IPC, as NCCL does). Algorithms that touch memory by hand, the node
// segment's, are marked host-only in the registry and run only where the
// host executor does.
//
// executors.cpp lists the executors this build has, in the order they are
// tried; the first that reaches every buffer of a call runs it.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "collectives/collective.hpp"
#include "collectives/cpu/reduce.hpp"
#include "collectives/primitives.hpp"
#include "memory/memory_kind.hpp"

namespace loom::coll {

class Links;

class Executor {
 public:
  virtual ~Executor() = default;

  // "cpu", "cuda": as logs and errors name it.
  virtual const char* name() const = 0;
  // Whether it reads and writes memory of `kind` itself.
  virtual bool reaches(memory::MemoryKind kind) const = 0;
  // Whether it is the host's: algorithms marked host-only run only there.
  virtual bool isHost() const = 0;

  // dst <- src; nothing when they are the same.
  virtual void copy(std::byte* dst, const std::byte* src, size_t bytes) const = 0;
  // dst <- op(sources...) element-wise, `count` elements (cpu/reduce.hpp's
  // rules; `scalar` is PreMulSum's factor).
  virtual void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst,
                      size_t count, double scalar = 1.0) const = 0;
  // dst[i] /= divisor (integer averages).
  virtual void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor) const = 0;
  // The primitives from `prev` to `next` (-1: none) over `links`.
  virtual std::unique_ptr<Primitives> primitives(Links& links, int prev, int next,
                                                 const PrimitiveCall& call) const = 0;
};

// Every executor of this build, in the order they are tried.
std::span<const Executor* const> executors();

// The executor that reaches both of the collective's buffers; throws
// loomInvalidUsage naming the buffer and its memory kind when none does.
const Executor& executorFor(const Collective& c);

}  // namespace loom::coll
