// The host executor: collectives on memory a CPU thread reads and writes
// (malloc'd, loomMemAlloc's shared buffers, pinned), run on the calling
// thread or its stream's worker with the reduction kernels of reduce.hpp.
#pragma once

#include "collectives/executor.hpp"

namespace loom::coll {

const Executor& hostExecutor();

}  // namespace loom::coll
