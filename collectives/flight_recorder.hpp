// The flight recorder: a communicator's last kCapacity collectives (sequence,
// collective, count, datatype, algorithm, state, start and end times), kept
// in a ring as they run. When one fails, its rank logs the record and, with
// LOOM_FLIGHT_RECORDER_FILE, writes it as JSON, so that a hang turned
// timeout shows what each rank had done and where it stopped; rank 0's
// report adds a survey of where every rank is.
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
    std::chrono::system_clock::time_point started;  // wall clock, to the kernel's tick: comparable across ranks
    std::chrono::system_clock::time_point ended;
    std::string error;
  };

  // A new entry, overwriting the oldest once full. Valid until kCapacity more
  // starts. `at`: when it started, ended or failed (coarseNow()).
  Entry& start(uint32_t sequence, const Collective& c, std::chrono::system_clock::time_point at);
  void finish(Entry& e, std::chrono::system_clock::time_point at);
  void fail(Entry& e, const std::string& error, std::chrono::system_clock::time_point at);

  std::vector<Entry> entries() const;  // oldest first
  // One line per entry, for the log; then `survey` (where every rank is, by
  // rank; empty when not surveyed).
  std::string text(int rank, const std::vector<std::string>& survey = {}) const;
  std::string json(int rank, const std::vector<std::string>& survey = {}) const;

 private:
  std::array<Entry, kCapacity> ring_{};
  uint64_t started_ = 0;
};

// Logs `recorder` and `survey` (WARN) and writes them to LOOM_FLIGHT_RECORDER_FILE when set.
void reportFlight(const FlightRecorder& recorder, int rank, const std::vector<std::string>& survey);

}  // namespace loom::coll
