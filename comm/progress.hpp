// Where a rank's collectives are: the last one begun and whether it ended,
// written by the collectives layer as they run and read by the watchdog's
// thread to answer a peer's survey ("rank 2: in allreduce #17 for 1520 ms")
// or a stalled peer's probe (collectives/stall_probe.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace loom {

class Progress {
 public:
  enum class State : uint8_t { None, Running, Done, Failed };
  // One collective as its peers may ask about it.
  struct Call {
    uint32_t sequence = 0;
    uint32_t call = 0;      // the collectives' call signature
    uint64_t bytes = 0;     // its count x datatype size
    uint64_t sentMask = 0;  // bit (peer mod 64) set: it sent to that peer
  };
  // What a peer's probe learns: the current (or last) collective and the
  // one before, so that a peer one call ahead can still say what it sent.
  struct Snapshot {
    State state = State::None;
    Call current;
    Call previous;
  };

  // `name` is a string literal (the collective's name); `at` when it began
  // (coarseNow(), which the caller reads once for this and its flight recorder).
  void begin(const char* name, uint32_t sequence, uint32_t call, uint64_t bytes,
             std::chrono::system_clock::time_point at);
  enum class Outcome { Done, Failed };
  void end(Outcome outcome, std::chrono::system_clock::time_point at);
  // The running collective sends to `peer` (before it does).
  void sentTo(int peer) { sentMask_.fetch_or(uint64_t{1} << (peer % 64), std::memory_order_relaxed); }
  std::string describe() const;
  // A consistent copy, for another thread.
  Snapshot snapshot() const;

 private:
  std::atomic<uint32_t> version_{0};  // odd while begin() rewrites the fields below
  std::atomic<const char*> name_{nullptr};
  std::atomic<uint32_t> sequence_{0};
  std::atomic<uint32_t> call_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> sentMask_{0};
  std::atomic<uint32_t> previousSequence_{0};
  std::atomic<uint32_t> previousCall_{0};
  std::atomic<uint64_t> previousBytes_{0};
  std::atomic<uint64_t> previousSentMask_{0};
  std::atomic<int> state_{0};            // 0 none yet, 1 running, 2 done, 3 failed
  std::atomic<int64_t> sinceUs_{0};      // coarse wall clock (coarseNow), when it began or ended
};

}  // namespace loom
