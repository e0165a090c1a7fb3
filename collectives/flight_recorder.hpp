// The flight recorder: a communicator's last kCapacity collectives (sequence,
// collective, count, datatype, algorithm, state, start and end times), kept
// in a ring as they run. When one fails, its rank logs the record and, with
// LOOM_FLIGHT_RECORDER_FILE, writes it as JSON, so that a hang turned
// timeout shows what each rank had done and where it stopped.
#pragma once

#include <loom/loom.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/collective.hpp"

namespace loom::coll {

class FlightRecorder {
 public:
  static constexpr size_t kCapacity = 64;

  enum class State { Running, Done, Failed };

  struct Entry {
    uint32_t sequence = 0;
    CollectiveKind kind = CollectiveKind::AllReduce;
    size_t count = 0;
    loomDataType_t type = loomFloat32;
    const char* algorithm = "-";  // set once the tuner chose
    State state = State::Running;
    std::chrono::system_clock::time_point started;  // wall clock: comparable across ranks
    std::chrono::system_clock::time_point ended;
    std::string error;
  };

  // A new entry, overwriting the oldest once full. Valid until kCapacity more starts.
  Entry& start(uint32_t sequence, const Collective& c);
  void finish(Entry& e);
  void fail(Entry& e, const std::string& error);

  std::vector<Entry> entries() const;  // oldest first
  std::string text(int rank) const;    // one line per entry, for the log
  std::string json(int rank) const;

 private:
  std::array<Entry, kCapacity> ring_{};
  uint64_t started_ = 0;
};

// Logs `recorder` (WARN) and writes it to LOOM_FLIGHT_RECORDER_FILE when set.
void reportFlight(const FlightRecorder& recorder, int rank);

}  // namespace loom::coll
