#include "transport/ucx/drainer.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "base/log.hpp"
#include "transport/ucx/ucp.hpp"

namespace loom::transport::ucx {

Drainer::Drainer() : thread_([this] { run(); }) {}

Drainer::~Drainer() {
  stop_.cancel();
  thread_.join();
}

void Drainer::add(Worker* worker) {
  std::lock_guard lock(mutex_);
  workers_.push_back(worker);
}

void Drainer::remove(Worker* worker) {
  std::lock_guard lock(mutex_);  // a pass over the workers holds it throughout
  std::erase(workers_, worker);
}

void Drainer::run() {
  using Clock = std::chrono::steady_clock;
  std::vector<pollfd> fds;
  while (!stop_.cancelled()) {
    fds.assign(1, pollfd{stop_.fd(), POLLIN, 0});
    auto sleep = std::chrono::duration_cast<std::chrono::nanoseconds>(kSleep);
    {
      std::lock_guard lock(mutex_);
      const auto now = Clock::now();
      for (Worker* worker : workers_) {
        std::unique_lock use(worker->mutex(), std::try_to_lock);
        if (!use.owns_lock() || now - worker->lastUse() < kIdle) {
          sleep = std::min<std::chrono::nanoseconds>(sleep, kIdle);  // look again once it may be idle
          continue;
        }
        // Bounded: a worker that keeps moving is looked at again next pass.
        for (int i = 0; i < 64 && worker->progress(); ++i) {
        }
        if (const int fd = worker->armedFd(); fd >= 0) {
          fds.push_back({fd, POLLIN, 0});
        } else {
          sleep = std::chrono::nanoseconds(0);  // events to progress first
        }
      }
    }
    const timespec timeout{.tv_sec = 0, .tv_nsec = static_cast<long>(sleep.count())};
    if (::ppoll(fds.data(), fds.size(), &timeout, nullptr) < 0 && errno != EINTR) {
      LOOM_WARN(Net, "the UCX drainer's ppoll failed (errno %d); it polls every %lld ms instead", errno,
                static_cast<long long>(kIdle.count()));
      std::this_thread::sleep_for(kIdle);
    }
  }
}

}  // namespace loom::transport::ucx
