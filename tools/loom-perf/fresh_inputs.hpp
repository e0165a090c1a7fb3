// Fresh inputs (-F 1 in loom-perf and the peer benchmarks): before each timed
// call every rank stores to each cache line of its input, as a training step
// that has just produced new gradients would. Without it a benchmark that
// calls a collective on the same unchanged buffer lets an implementation that
// reads its peers' inputs in place (Open MPI's single copy) find them still
// cached near the reader from the previous call, which no real workload offers.
// The rewrite itself is not timed.
#pragma once

#include <cstddef>

namespace loom::perf {

// Stores each 64-byte line of [data, data + bytes) back unchanged: the line
// becomes modified in this core's cache, so copies that peers hold are invalid.
inline void rewriteLines(void* data, size_t bytes) {
  constexpr size_t kLine = 64;
  volatile unsigned char* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < bytes; i += kLine) p[i] = p[i];
  if (bytes != 0) p[bytes - 1] = p[bytes - 1];
}

}  // namespace loom::perf
