#include "base/asymmetric_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.hpp"

namespace loom {
namespace {

long membarrier(int command) { return ::syscall(__NR_membarrier, command, 0, 0); }

}  // namespace

bool AsymmetricFence::registerProcess() {
  // Asked each time, not remembered: a child of fork() has a memory map of
  // its own, which the parent's registration does not cover.
  const long commands = membarrier(MEMBARRIER_CMD_QUERY);
  if (commands < 0 || (commands & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
}

void AsymmetricFence::heavy() const {
  if (!split_) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return;
  }
  // Registered, so the command cannot be refused; should the kernel fail it
  // anyway, a sleeper could sleep through a post: better said than missed.
  if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) {
    throwSystemError("membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), registered for", errno);
  }
}

}  // namespace loom
