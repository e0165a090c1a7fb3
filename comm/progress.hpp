// Where a rank's collectives are: the last one begun and whether it ended,
// written by the collectives layer as they run and read by the watchdog's
// thread to answer a peer's survey ("rank 2: in allreduce #17 for 1520 ms").
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace loom {

class Progress {
 public:
  // `name` is a string literal (the collective's name).
  void begin(const char* name, uint32_t sequence);
  void end(bool failed);
  std::string describe() const;

 private:
  std::atomic<const char*> name_{nullptr};
  std::atomic<uint32_t> sequence_{0};
  std::atomic<int> state_{0};            // 0 none yet, 1 running, 2 done, 3 failed
  std::atomic<int64_t> sinceUs_{0};      // coarse monotonic clock, when it began or ended
};

}  // namespace loom
