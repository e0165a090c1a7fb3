#include "comm/engine/stream.hpp"

#include "base/error.hpp"
#include "base/live_handles.hpp"

namespace loom {
namespace {

LiveHandles<HostStream>& liveStreams() {
  static LiveHandles<HostStream> live;
  return live;
}

}  // namespace

HostStream::HostStream() {
  worker_ = std::thread([this] { run(); });
  liveStreams().add(this);
}

HostStream::~HostStream() {
  liveStreams().remove(this);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

bool HostStream::isLive(const HostStream* stream) { return liveStreams().contains(stream); }

void HostStream::enqueue(std::function<void()> task, std::function<void()> /*giveUp: nothing to wait for*/) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  changed_.notify_all();
}

void HostStream::synchronize() {
  std::unique_lock lock(mutex_);
  // Every task ends within its communicator's deadline, so this wait does too.
  changed_.wait(lock, [this] { return queue_.empty() && !busy_; });
  if (error_ != loomSuccess) {
    Error e(error_, message_);
    error_ = loomSuccess;
    message_.clear();
    throw e;
  }
}

void HostStream::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and the queue is drained
    auto task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    loomResult_t code = loomSuccess;
    std::string message;
    try {
      task();
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    } catch (const std::exception& e) {
      code = loomInternalError;
      message = e.what();
    }
    lock.lock();
    busy_ = false;
    if (code != loomSuccess && error_ == loomSuccess) {
      error_ = code;
      message_ = std::move(message);
    }
    changed_.notify_all();
  }
}

}  // namespace loom
