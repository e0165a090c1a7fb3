// One collective call as the algorithms see it: what to do, on which
// buffers, reduced how. Built and validated by the C API (api/), resolved
// by run.cpp, executed by one algorithm (algorithms/).
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <cstdint>

#include "collectives/cpu/reduce.hpp"
#include "memory/memory_kind.hpp"

namespace loom::coll {

enum class CollectiveKind { Broadcast, Reduce, AllReduce, ReduceScatter, AllGather, AlltoAll, Gather, Scatter };
constexpr int kCollectiveKinds = 8;

// "allreduce", "allgather", ...: the names LOOM_ALGO and the logs use.
const char* collectiveName(CollectiveKind kind);

// How elements combine. Avg and PreMulSum are resolved around the
// algorithm (run.cpp): PreMulSum scales the rank's own input once before it,
// Avg divides the result after it, so the algorithms only ever see Sum,
// Prod, Min or Max.
struct Reduction {
  cpu::ReduceOp op = cpu::ReduceOp::Sum;
  bool average = false;  // Sum, then divide the result by nranks
  double scalar = 1.0;   // PreMulSum's factor for this rank
};

struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  size_t count = 0;  // elements, as in the C signature (per block where blocks apply)
  loomDataType_t type = loomFloat32;
  size_t typeSize = 4;
  Reduction reduction;
  int root = 0;
  // What the buffers are, and the bytes of each this rank reads (send) or
  // writes (recv): 0 for a buffer it ignores (a non-root's), whose kind is Host.
  memory::MemoryKind sendKind = memory::MemoryKind::Host;
  memory::MemoryKind recvKind = memory::MemoryKind::Host;
  size_t sendBytes = 0;
  size_t recvBytes = 0;

  size_t blockBytes() const { return count * typeSize; }
};

}  // namespace loom::coll
