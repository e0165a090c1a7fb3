// The frames watchdogs exchange (watchdog.hpp), as values. decode() checks
// every field (the sender and any rank named in range, strings bounded,
// nothing left over) before a watchdog acts on one.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/bootstrap/frame.hpp"
#include "comm/progress.hpp"

namespace loom {

struct WatchdogMessage {
  static constexpr size_t kMaxTextBytes = 2048;
  static constexpr size_t kMaxUniqueIdBytes = LOOM_UNIQUE_ID_BYTES;

  FrameType type = FrameType::Heartbeat;  // Heartbeat, Goodbye, FailureNotice, ShrinkOffer, ProgressQuery,
                                          // ProgressReport, MismatchNotice or LossNotice
  int from = -1;                          // the sender's rank: every message names it
  int failed = -1;                        // FailureNotice: the rank that failed
  std::string text{};                     // FailureNotice: why; ProgressReport: where the sender's collectives
                                          // are; MismatchNotice: what the sender found out of step;
                                          // LossNotice: what a call of the sender lost
  Progress::Snapshot progress{};          // ProgressReport: the sender's collective, as values
  uint32_t epoch = 0;                     // ShrinkOffer: which shrink of the parent
  std::vector<std::byte> uniqueId{};      // ShrinkOffer: the new communicator's id

  std::vector<std::byte> encode() const;  // the frame's payload
  // loomRemoteError naming the defect. `self` is the receiving rank of
  // `nranks`: no message comes from it, and no notice names it as failed.
  static WatchdogMessage decode(const Frame& frame, int nranks, int self);
};

}  // namespace loom
