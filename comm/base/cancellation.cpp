#include "comm/base/cancellation.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "comm/base/error.hpp"

namespace loom {

Cancellation::Cancellation() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throwSystemError("eventfd", errno);
}

Cancellation::~Cancellation() { ::close(fd_); }

void Cancellation::cancel() noexcept {
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  uint64_t one = 1;
  // The counter only grows, so the fd stays readable for every later poll().
  [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
}

void Cancellation::throwIfCancelled() const {
  if (cancelled()) throw Error(loomInvalidUsage, "operation aborted by loomCommAbort");
}

}  // namespace loom
