// An event on host streams (as CUDA's on its streams): record() marks the
// point a stream's queue has reached when it is called, and the event is
// done once the stream's work up to that point has run. A stream can be
// made to wait for it (waitOn), and a caller can ask without blocking
// (done) or wait (synchronize). Recording again marks a new point; the
// older one is forgotten. Waits are for the point recorded when the wait
// was asked for, so no two streams can wait on each other in a cycle.
//
// The state is shared with the tasks that reach or wait for a point, so an
// event destroyed while its point is pending goes once they have run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>

#include "comm/engine/stream.hpp"

namespace loom {

class HostEvent {
 public:
  HostEvent();
  ~HostEvent();
  HostEvent(const HostEvent&) = delete;
  HostEvent& operator=(const HostEvent&) = delete;

  // Marks the point `stream` has reached (null: a blocking stream, whose
  // work is all done: the point is reached now).
  void record(HostStream* stream);
  // Whether the last recorded point is reached (true when none was recorded).
  bool done() const;
  // Waits until the point recorded before this call is reached. Every
  // stream task ends within its communicator's deadline, so this wait does too.
  void synchronize() const;
  // Makes `stream`'s later work wait for the point recorded before this call.
  void waitOn(HostStream& stream) const;

  // Whether `event` is a live event (handles are checked before use).
  static bool isLive(const HostEvent* event);

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable reachedChanged;
    uint64_t recorded = 0;         // points recorded so far, numbered from 1
    std::set<uint64_t> pending;    // recorded and not yet reached (on several streams, in any order)
  };
  static void reach(State& state, uint64_t point);
  static void awaitPoint(State& state, uint64_t point);

  std::shared_ptr<State> state_;
};

}  // namespace loom

// The C handle is the event itself.
struct loomEventImpl final : loom::HostEvent {};
