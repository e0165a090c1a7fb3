#include "collectives/executor.hpp"

#include <array>
#include <string>

#include "base/error.hpp"
#include "collectives/cpu/host_executor.hpp"

namespace loom::coll {

std::span<const Executor* const> executors() {
  // One line per executor; a CUDA one goes first when it exists, so that
  // host buffers still run on the CPU and device buffers run on the GPU.
  static const std::array<const Executor*, 1> kExecutors{&hostExecutor()};
  return kExecutors;
}

const Executor& executorFor(const Collective& c) {
  for (const Executor* executor : executors()) {
    if (executor->reaches(c.sendKind) && executor->reaches(c.recvKind)) return *executor;
  }
  const bool sendUnreached = [&] {
    for (const Executor* executor : executors()) {
      if (executor->reaches(c.sendKind)) return false;
    }
    return true;
  }();
  const char* buffer = sendUnreached ? "sendbuff" : "recvbuff";
  const memory::MemoryKind kind = sendUnreached ? c.sendKind : c.recvKind;
  throw Error(loomInvalidUsage, std::string(collectiveName(c.kind)) + ": " + buffer + " is " +
                                    memory::memoryKindName(kind) + " memory, which no executor of this build reaches");
}

}  // namespace loom::coll
