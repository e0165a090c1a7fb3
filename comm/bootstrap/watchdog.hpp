// The watch each rank keeps over its communicator's peers, so that a failure
// anywhere becomes an error everywhere, quickly, naming the rank.
//
// - Heartbeats go round the ring of ranks on connections of their own: each
//   rank sends one to the next rank every LOOM_HEARTBEAT_MS, from a thread
//   that user code cannot block. So each rank has one watcher, its next.
// - The watcher declares its previous rank failed when that connection
//   closes without a Goodbye (the process died, or aborted its communicator)
//   or carries no heartbeat for kSilentBeats periods (stopped, or its host is
//   gone). It revokes its own communicator and sends a FailureNotice to every
//   other rank's bootstrap listener, which stays open for this (and for
//   shrink offers); each revokes its communicator on receipt. Pending and
//   later operations then fail with loomRemoteError naming the rank.
// - Those notices go out even if the watcher's program aborts its
//   communicator on hearing of the failure (the abort waits for them), and a
//   rank whose previous rank's heartbeats end first reads what its listener
//   holds: a notice from that rank, sent before it left, names the rank that
//   failed, not the one that left because of it.
// - The ring closes over a failed rank: its previous rank sends heartbeats
//   to the next live one, which watches it in turn (and declares it at once
//   if its listener refuses a connection). So neighbours that die together
//   are all named: the watcher of the first was the second.
// - A communicator destroyed in order sends a Goodbye first: a rank that
//   finished before its peers is not a failure.
// - Everything arriving on the listener is read as it comes from
//   non-blocking sockets and checked (secret, type, length) before use; a
//   stranger's connection is dropped and logged, and stalls nothing.
// - A rank whose collective found the ranks out of step in the data path
//   (different calls, counts, types, ops or roots) sends a MismatchNotice
//   to every other rank, so that those waiting on it fail at once instead
//   of at their deadline.
// - A rank whose call lost a peer or a link in the data path before any
//   notice told it why (a data connection reset under it, or one that went
//   dark: nothing crossed it for LOOM_TIMEOUT_MS while the peer was still
//   in the call, or answered nothing out of band either) sends a
//   LossNotice to every other rank: each revokes its communicator with
//   that rank's words, which name both ends. A failure that only one data
//   connection sees is then everyone's error, not one rank's.
// - Any rank may survey the others: each watchdog answers a ProgressQuery
//   with where its rank's collectives are, so a failed collective's report
//   can say where every rank stopped, and which did not answer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/cancellation.hpp"
#include "base/deadline.hpp"
#include "base/net/socket.hpp"
#include "base/secret.hpp"
#include "comm/bootstrap/frame.hpp"
#include "comm/bootstrap/watchdog_message.hpp"
#include "comm/progress.hpp"

namespace loom {

class Watchdog {
 public:
  // Heartbeats a rank may miss before its watcher declares it failed.
  static constexpr int kSilentBeats = 5;

  struct Settings {
    std::chrono::milliseconds heartbeat{1000};  // 0: no heartbeats, so no silence checks
    std::chrono::milliseconds timeout{300000};  // for connecting and for shrink offers
    static Settings fromEnv(std::chrono::milliseconds timeout);  // LOOM_HEARTBEAT_MS
  };
  // What the watchdog tells its communicator, on the watchdog's thread.
  struct Handlers {
    // Once per failed rank.
    std::function<void(int rank, const std::string& why)> onFailure;
    // A peer found the ranks out of step (reportMismatch).
    std::function<void(int from, const std::string& what)> onMismatch;
    // A call of a peer lost a peer or a link (reportLoss).
    std::function<void(int from, const std::string& what)> onLoss;
    // Where this rank's collectives are, for surveys and probes.
    const Progress* progress = nullptr;
    // Run on the watch's thread at every turn (at least once a second): the
    // deadlines of work no host thread waits for (comm/resident_area.hpp).
    std::function<void()> tick;
  };

  // `addresses[r]` is rank r's bootstrap listener; `listener` is this rank's.
  Watchdog(const Secret& secret, int rank, std::vector<std::string> addresses, net::Socket listener,
           Settings settings, Handlers handlers);
  ~Watchdog();  // stop()
  // Ends the watch, with a Goodbye to the next rank unless abandoned. Also
  // run for every live watchdog when the process exits (atexit): a rank that
  // returns from main without destroying its communicator has not failed.
  void stop();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // loomCommAbort: leave without a Goodbye, so the next rank reports this one.
  void abandon() noexcept { abandoned_.store(true, std::memory_order_release); }

  // Shrink: the survivors' new rank 0 hands each survivor the new
  // communicator's unique id; the others wait for the one from `from`.
  void sendOffer(int to, uint32_t epoch, std::span<const std::byte> uniqueId, Deadline deadline);
  std::vector<std::byte> awaitOffer(int from, uint32_t epoch, Deadline deadline);

  // Tells every other rank what this one found out of step (a MismatchNotice
  // each, from the calling thread; an unreachable rank is skipped).
  void reportMismatch(const std::string& what);
  // Tells every other rank but `skip` what a call of this one lost (a
  // LossNotice each).
  void reportLoss(const std::string& what, int skip = -1);

  // Asks `rank` where its collectives are; nothing when it does not answer
  // `within` (a stopped rank is the heartbeats' business).
  std::optional<Progress::Snapshot> probe(int rank, std::chrono::milliseconds within);

  // Asks every rank where its collectives are, all at once; one line per
  // rank ("in allreduce #3 for 1002 ms", "no answer within 1000 ms",
  // "unreachable (...)"), this rank's own included. Ranks in `failed` are
  // not asked (a stopped one would hold the answer back `within`).
  std::vector<std::string> survey(std::chrono::milliseconds within, std::span<const int> failed = {});

 private:
  struct Incoming;  // an accepted connection and its frame reader

  void run();
  // A connection to `rank`'s listener; a short-lived one carrying one frame.
  net::Socket connectTo(int rank, Deadline deadline, const Cancellation* cancel) const;
  void sendTo(int rank, FrameType type, std::span<const std::byte> payload, Deadline deadline,
              const Cancellation* cancel) const;
  void connectNext(Deadline deadline);
  void beat(std::chrono::steady_clock::time_point now);
  // Takes every connection waiting on the listener; returns how many.
  size_t acceptPending(std::vector<std::unique_ptr<Incoming>>& incoming);
  // Handles what `in` has sent; false once the connection is done with.
  bool serve(Incoming& in);
  // prev_'s heartbeats ended without a Goodbye (prevEnded_): declares it,
  // once the notices its last acts left on the listener are read.
  void declareEndedPrev(std::vector<std::unique_ptr<Incoming>>& incoming);
  void declare(int rank, const std::string& why);
  bool isDeclared(int rank) const;
  // The first rank from `from` in direction `step` (+1, -1) not declared
  // failed; -1 when only this rank is left.
  int nearestLive(int from, int step) const;
  // `failed` is declared: the ring of heartbeats closes over it (this rank
  // sends to the next live rank, and watches the previous live one).
  void closeRing(int failed);
  // The previous rank this one took over watching has sent no heartbeat
  // yet: declares it if its listener refuses a connection.
  void probeUnheardPrev();
  // How long closing the ring may wait to reach a rank: a heartbeat period.
  std::chrono::milliseconds rewatchWithin() const;
  // Sends `notice` to every other rank but `skip` (tell), ended early by stop().
  void tellEveryone(const WatchdogMessage& notice, const char* what, int skip = -1);
  // Sends `notice` to `ranks`, several at once (an unreachable one costs
  // kNotifyTimeout, not that times the ranks after it); one that cannot be
  // reached is logged and skipped. `cancel` ends the sends early (none: only
  // their deadlines do).
  void tell(std::span<const int> ranks, const WatchdogMessage& notice, const char* what, const Cancellation* cancel);
  void sayGoodbye();

  Secret secret_;
  int rank_;
  int nranks_;
  int next_;
  int prev_;
  std::vector<std::string> addresses_;
  net::Socket listener_;
  Settings settings_;
  Handlers handlers_;

  // The thread's own state.
  net::Socket toNext_;
  std::vector<std::byte> outbox_;  // frames for the next rank not yet in its kernel
  std::chrono::steady_clock::time_point nextBeat_{};
  std::chrono::steady_clock::time_point prevHeard_{};  // the last heartbeat from prev_, or the start
  bool prevLeft_ = false;                              // prev_ said Goodbye
  struct Ended {
    int rank;
    std::string why;
  };
  std::optional<Ended> prevEnded_;  // prev_, whose heartbeats ended without a Goodbye, not yet declared
  bool prevUnheard_ = false;  // prev_ was taken over (closeRing) and has sent no heartbeat since
  std::chrono::steady_clock::time_point nextPrevProbe_{};
  std::vector<int> declared_;

  std::mutex offersMutex_;
  std::condition_variable offersChanged_;
  std::map<std::pair<int, uint32_t>, std::vector<std::byte>> offers_;  // (from, epoch) -> unique id

  std::atomic<bool> abandoned_{false};
  Cancellation stop_;
  std::once_flag stopped_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace loom
