#include "collectives/stall_probe.hpp"

#include "base/error.hpp"
#include "collectives/call_signature.hpp"

namespace loom::coll {
namespace {

constexpr std::chrono::milliseconds kFirstProbe{100};
// How long a probe waits for the answer: a live watchdog answers in well under a millisecond.
constexpr std::chrono::milliseconds kAnswerWithin{200};

std::string describe(const Progress::Call& c) {
  return describeCall(c.call, c.sequence) + " of " + std::to_string(c.bytes) + " bytes";
}

}  // namespace

StallProbe::StallProbe(Communicator& comm, uint32_t sequence, uint32_t call, uint64_t bytes, Waits waits)
    : comm_(comm), ours_{.sequence = sequence, .call = call, .bytes = bytes}, waits_(waits), probeAt_(kFirstProbe) {}

void StallProbe::check(int peer, std::chrono::steady_clock::duration stalled, const std::string& what) {
  if (stalled < probeAt_ / 2) probeAt_ = kFirstProbe;  // things moved since: a new stall
  if (stalled < probeAt_) return;
  probeAt_ = stalled * 2;
  const auto at = comm_.probe(peer, kAnswerWithin);
  if (!at) return;  // no answer: a stopped or dead peer is the watchdog's and the deadline's
  const uint64_t me = uint64_t{1} << (comm_.rank() % 64);
  // The peer's record of this rank's call, if it has one: its current
  // call, or the one before when it is already one call further.
  const Progress::Call* same = at->current.sequence == ours_.sequence    ? &at->current
                               : at->previous.sequence == ours_.sequence ? &at->previous
                                                                         : nullptr;
  if (same == nullptr) return;  // behind, or too far ahead to tell
  const bool running = same == &at->current && at->state == Progress::State::Running;
  const bool finished = same == &at->previous || at->state == Progress::State::Done;
  std::string why;
  if (running && (same->call != ours_.call || same->bytes != ours_.bytes)) {
    why = " is in " + describe(*same);
  } else if (finished && waits_ == Waits::ForData && (same->sentMask & me) == 0) {
    why = " finished " + describe(*same) + " without sending this rank anything";
  } else {
    return;
  }
  throw Error(loomInvalidUsage, what + ": rank " + std::to_string(peer) + why + " while this rank waits on it in " +
                                    describe(ours_) +
                                    " (every rank must make the same calls in the same order, with matching counts, "
                                    "types, ops, roots and peers)");
}

void StallProbe::throwIfDark(int peer, const std::string& stalled) {
  comm_.throwIfLinkDown(peer, stalled, [&](const Progress::Snapshot& at) {
    return at.state == Progress::State::Running && at.current.sequence == ours_.sequence && at.current.call == ours_.call;
  });
}

}  // namespace loom::coll
