// What each rank did when in a training step, for loom-train's --timeline:
// a Chrome trace (chrome://tracing, Perfetto) with one track per rank, and
// the idle gaps between its work drawn as such.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace loom::train {

struct TimelineEvent {
  // Gather: ZeRO's parameter all-gather of unit `chunk`, from its launch to
  // the moment the compute waited for it. Under a zero-bubble schedule
  // Backward is B (dL/dx) and Weights is W (the parameters' gradients).
  // Reduce: the mesh's data-parallel reductions of a step, from the first
  // one's launch to the end of the wait for them all.
  enum class Kind { Forward, Backward, Send, Receive, Optimizer, Gather, Weights, Reduce };
  Kind kind;
  int micro;     // -1 where none
  int chunk;     // -1 where none
  double start;  // monotonicSeconds() (clock.hpp)
  double end;
};

// Five doubles an event, for gathering over Loom; unpack skips padding (kind < 0).
std::vector<double> packEvents(std::span<const TimelineEvent> events);
std::vector<TimelineEvent> unpackEvents(std::span<const double> packed);
inline constexpr size_t kPackedEventDoubles = 5;

// Writes ranks[r]'s events as track r, times from the earliest event; gaps
// between a rank's events are "idle". Throws std::runtime_error naming the
// file when it cannot be written.
void writeChromeTrace(const std::string& path, const std::vector<std::vector<TimelineEvent>>& ranks);

}  // namespace loom::train
