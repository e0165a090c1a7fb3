// A Loom host stream: work runs in the order it was enqueued, on the
// stream's own worker thread, asynchronously to the thread that enqueued it
// (as a CUDA stream does for kernels). Different streams run concurrently.
// A task that fails records the stream's error; later tasks still run, and
// synchronize() reports the first error since the previous synchronize().
#pragma once

#include <loom/loom.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace loom {

class HostStream {
 public:
  HostStream();
  // Finishes the queued work, then stops the worker.
  virtual ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  // `task` throws loom::Error to fail. `giveUp` is for streams whose tasks
  // first wait for other work (a CUDA stream's, cuda_stream.hpp): it runs
  // between polls of that wait and throws to abandon it (an abort).
  virtual void enqueue(std::function<void()> task, std::function<void()> giveUp);
  void enqueue(std::function<void()> task) { enqueue(std::move(task), {}); }
  // Waits until everything enqueued so far has run; throws the first error
  // recorded since the last call, then forgets it.
  void synchronize();

  // Whether `stream` is a live host stream (handles are checked before use).
  static bool isLive(const HostStream* stream);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  loomResult_t error_ = loomSuccess;
  std::string message_;
  std::thread worker_;
};

}  // namespace loom

// The C handle is the stream itself.
struct loomStreamImpl final : loom::HostStream {};
