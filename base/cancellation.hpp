// A one-shot "stop waiting" signal that poll() can watch: an eventfd that
// becomes readable once cancel() is called. loomCommAbort uses it to unblock
// every wait of a communicator at once, from any thread; so does a peer's
// failure, which revokes the communicator with a reason naming that peer.
#pragma once

#include <loom/loom.h>

#include <atomic>
#include <mutex>
#include <string>

namespace loom {

class Cancellation {
 public:
  Cancellation();
  ~Cancellation();
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // loomCommAbort: waits end with loomInvalidUsage, "aborted by loomCommAbort".
  void cancel() noexcept;
  // A failure elsewhere: waits end with `code` and `why`. The first cancel wins.
  void cancel(loomResult_t code, const std::string& why) noexcept;
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }
  // Readable once cancelled; add it to every poll() set.
  int fd() const noexcept { return fd_; }
  // Throws the reason if cancelled, prefixed with `what` ("allreduce #3") when given.
  // Inline: every call and wait asks, and almost always the answer is no.
  void throwIfCancelled() const {
    if (cancelled()) throwCancelled(nullptr);
  }
  void throwIfCancelled(const std::string& what) const {
    if (cancelled()) throwCancelled(&what);
  }
  // The code waits end with; loomSuccess while not cancelled.
  loomResult_t code() const noexcept;

 private:
  [[noreturn]] void throwCancelled(const std::string* what) const;

  int fd_;
  mutable std::mutex mutex_;  // guards the reason while it is set
  loomResult_t code_ = loomSuccess;
  std::string why_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace loom
