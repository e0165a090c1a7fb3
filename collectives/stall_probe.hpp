// What a collective's wait does when a peer has sent nothing for a while:
// it asks that peer, out of band (the watchdog's progress query), where it
// is. Ranks out of step can wait on each other in a cycle in which no slot
// ever crosses (a broadcast's receivers wait on the root, while the root,
// in a reduce, waits on them), or wait on a peer that has finished a call
// that never needed them, so no tag can show it; the peer's answer can.
// The first probe goes out after 100 ms of silence, later ones at doubling
// intervals: a peer that is merely late (behind in an earlier call, or
// computing) costs a handful of queries, and a rank out of step is named
// within about 100 ms instead of at LOOM_TIMEOUT_MS.
//
// Only certainties count, so that a slow or lossy network never passes for
// a mismatch: the peer is in this same call with another signature or
// count, or it has finished this call without sending this rank anything.
// A peer that finished it after sending to this rank may have data still
// in flight, and is left to the tags and the deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "comm/communicator.hpp"

namespace loom::coll {

class StallProbe {
 public:
  // What the wait waits for: data a peer sends (Links, the engine), or a
  // peer's step on the node's shared segment, which sends nothing (so a
  // peer that finished there tells nothing).
  enum class Waits { ForData, ForSteps };
  // This rank's collective: its sequence number, call signature and count x datatype size.
  StallProbe(Communicator& comm, uint32_t sequence, uint32_t call, uint64_t bytes, Waits waits = Waits::ForData);

  // A wait loop's idle step: nothing has come from or gone to `peer` for
  // `stalled`. Throws loomInvalidUsage, prefixed with `what`, naming the
  // peer and both calls when the peer is certainly out of step.
  void check(int peer, std::chrono::steady_clock::duration stalled, const std::string& what);

  // The deadline passed with nothing from or to `peer` (`stalled` says so):
  // Communicator::throwIfLinkDown, the peer's answer read against this
  // collective (in it, running: the link is down).
  void throwIfDark(int peer, const std::string& stalled);

 private:
  Communicator& comm_;
  Progress::Call ours_;
  Waits waits_;
  std::chrono::steady_clock::duration probeAt_;  // of the current stall
};

}  // namespace loom::coll
