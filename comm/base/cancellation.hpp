// A one-shot "stop waiting" signal that poll() can watch: an eventfd that
// becomes readable once cancel() is called. loomCommAbort uses it to unblock
// every wait of a communicator at once, from any thread.
#pragma once

#include <atomic>

namespace loom {

class Cancellation {
 public:
  Cancellation();
  ~Cancellation();
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  void cancel() noexcept;
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }
  // Readable once cancelled; add it to every poll() set.
  int fd() const noexcept { return fd_; }
  // Throws loomInvalidUsage ("aborted") if cancelled.
  void throwIfCancelled() const;

 private:
  int fd_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace loom
