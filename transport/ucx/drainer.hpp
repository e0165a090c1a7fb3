// Writes out what UCX still holds of sends that their thread has finished
// with. A UCX send completes when UCX has the bytes, not when they have left
// the process: over tcp the tail of a message may wait in the endpoint's
// buffer until the socket takes more, and only a progress call on its
// worker writes it. Loom progresses a connection from the thread that uses
// it, while a call uses it; a rank that sent its last slot and went on (to
// a call with other peers, or back to its caller) would leave the peer
// waiting for bytes only this rank can write. (NCCL's network transports
// have their proxy thread for this.)
//
// One thread per transport (per communicator) progresses the sending
// workers that their own threads have not touched for kIdle, and sleeps on
// their event fds: bytes UCX holds make it wait for the socket to be
// writable, which wakes this thread when it is. A worker in use is its
// thread's alone (Worker::use); this thread only takes one that is idle.
#pragma once

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "base/cancellation.hpp"

namespace loom::transport::ucx {

class Worker;

class Drainer {
 public:
  Drainer();
  // Stops the thread; every worker must have been removed.
  ~Drainer();
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  void add(Worker* worker);
  // Returns once the thread no longer touches `worker`.
  void remove(Worker* worker);

  // How long a worker's own thread must have left it alone first.
  static constexpr auto kIdle = std::chrono::milliseconds(1);
  // The longest sleep while every worker waits on its event fd.
  static constexpr auto kSleep = std::chrono::milliseconds(50);

 private:
  void run();

  std::mutex mutex_;  // workers_, and a pass over them
  std::vector<Worker*> workers_;
  Cancellation stop_;
  std::thread thread_;
};

}  // namespace loom::transport::ucx
