#include "base/cancellation.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "base/error.hpp"

namespace loom {

Cancellation::Cancellation() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throwSystemError("eventfd", errno);
}

Cancellation::~Cancellation() { ::close(fd_); }

void Cancellation::cancel() noexcept { cancel(loomInvalidUsage, "aborted by loomCommAbort"); }

void Cancellation::cancel(loomResult_t code, const std::string& why) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (cancelled_.load(std::memory_order_relaxed)) return;
    code_ = code;
    try {
      why_ = why;
    } catch (...) {
      // out of memory: the code alone still ends the waits
    }
    cancelled_.store(true, std::memory_order_release);
  }
  uint64_t one = 1;
  // The counter only grows, so the fd stays readable for every later poll().
  [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
}

loomResult_t Cancellation::code() const noexcept {
  if (!cancelled()) return loomSuccess;
  std::lock_guard lock(mutex_);
  return code_;
}

void Cancellation::throwCancelled(const std::string* what) const {
  std::lock_guard lock(mutex_);
  throw Error(code_, what == nullptr || what->empty() ? why_ : *what + ": " + why_);
}

}  // namespace loom
