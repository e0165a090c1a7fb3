#include "comm/engine/event.hpp"

#include "base/live_handles.hpp"

namespace loom {
namespace {

LiveHandles<HostEvent>& liveEvents() {
  static LiveHandles<HostEvent> live;
  return live;
}

}  // namespace

HostEvent::HostEvent() : state_(std::make_shared<State>()) { liveEvents().add(this); }

HostEvent::~HostEvent() { liveEvents().remove(this); }

bool HostEvent::isLive(const HostEvent* event) { return liveEvents().contains(event); }

void HostEvent::reach(State& state, uint64_t point) {
  {
    std::lock_guard lock(state.mutex);
    state.pending.erase(point);
  }
  state.reachedChanged.notify_all();
}

void HostEvent::awaitPoint(State& state, uint64_t point) {
  std::unique_lock lock(state.mutex);
  state.reachedChanged.wait(lock, [&] { return state.pending.count(point) == 0; });
}

void HostEvent::record(HostStream* stream) {
  uint64_t point = 0;
  {
    std::lock_guard lock(state_->mutex);
    point = ++state_->recorded;
    if (stream == nullptr) return;  // reached as it is recorded
    state_->pending.insert(point);
  }
  stream->enqueue([state = state_, point] { reach(*state, point); });
}

bool HostEvent::done() const {
  std::lock_guard lock(state_->mutex);
  return state_->pending.count(state_->recorded) == 0;
}

void HostEvent::synchronize() const {
  uint64_t point = 0;
  {
    std::lock_guard lock(state_->mutex);
    point = state_->recorded;
  }
  awaitPoint(*state_, point);
}

void HostEvent::waitOn(HostStream& stream) const {
  uint64_t point = 0;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->pending.count(state_->recorded) == 0) return;  // reached: nothing to wait for
    point = state_->recorded;
  }
  stream.enqueue([state = state_, point] { awaitPoint(*state, point); });
}

}  // namespace loom
