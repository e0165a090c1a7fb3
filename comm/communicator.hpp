// The communicator: a rank's view of its group (rank, size, which ranks share
// its node), its bootstrap network, and its state for the C API (async
// error, last error message, the cancellation that loomCommAbort fires), and
// its progress engine.
#pragma once

#include <loom/loom.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/cancellation.hpp"
#include "base/device/staging.hpp"
#include "comm/bootstrap/bootstrap.hpp"
#include "comm/config.hpp"
#include "comm/engine/engine.hpp"
#include "comm/engine/stream.hpp"
#include "comm/entry_gate.hpp"
#include "comm/progress.hpp"
#include "comm/resident_area.hpp"
#include "comm/symmetric_windows.hpp"
#include "topology/placement.hpp"

namespace loom {

// What a layer above keeps per communicator (the collectives' connections,
// shared segments and reduction ops): created by that layer on first use,
// destroyed with the communicator, before its engine.
class CommExtension {
 public:
  virtual ~CommExtension() = default;
};

class Communicator {
 public:
  explicit Communicator(Config config);
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Rendezvous and bootstrap. Blocking: returns when done or throws.
  void init(const UniqueIdData& id, int rank, int nranks);
  // The same on a thread of the communicator; asyncError() is loomInProgress until it ends.
  void initAsync(const UniqueIdData& id, int rank, int nranks);
  // A non-blocking communicator's finalize: `work` on a thread of the
  // communicator; state() is loomInProgress until it ends, then loomSuccess
  // or the error it threw (NCCL's ncclCommFinalize).
  void finalizeAsync(std::function<void()> work);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }
  const std::vector<PeerInfo>& peers() const;
  // Every rank's place and the ring, trees and NICs planned from them.
  const topo::Placement& placement() const;
  Bootstrap& bootstrap();
  // The data path: connections to peers and the ops posted on them.
  Engine& engine() {
    requireReady();
    return *engine_;
  }
  // The transport that carries this rank's messages to `peer` ("self",
  // "shm", "socket"); also on a revoked communicator (diagnostic queries).
  const char* transportTo(int peer) const;
  const Config& config() const { return config_; }
  // The CUDA device current on the thread that created this rank (for
  // loomCommInitAll's, the one its devlist names), -1 where none was
  // visible: what loomCommCuDevice answers.
  int cudaDevice() const { return cudaDevice_; }

  // Throws unless init finished successfully (loomInProgress while it runs,
  // the init error after a failure) and nothing revoked or aborted it.
  // Inline: every call asks, and almost always the answer is yes.
  void requireReady() const {
    cancel_.throwIfCancelled();
    requireInitialized();
  }
  // The same, but a revoked communicator passes (shrink uses it).
  void requireInitialized() const {
    if (const loomResult_t state = asyncError(); state != loomSuccess) throwNotInitialized(state);
  }
  loomResult_t asyncError() const { return asyncError_.load(std::memory_order_acquire); }

  // Unblocks every wait at once; the object stays valid until deleted. The
  // peers learn of it as of a failure (no goodbye).
  void abort() noexcept;
  // LOOM_SHRINK_ABORT: ends what is in flight on this communicator as
  // loomCommAbort does (calling thread excepted) but keeps it, and is no
  // failure for the peers.
  void cancelOperations();
  // A peer failed: every pending and later operation fails with
  // loomRemoteError naming it. Called by the watchdog.
  void revoke(int rank, const std::string& why);
  // A call of this rank met a lost peer or link itself (a connection closed,
  // reset or dark under it): the communicator is as broken as if it had been
  // told, and is revoked with that message, and unless a notice revoked it
  // first, every other rank is told (Watchdog::reportLoss), so that none
  // waits out its deadline on a failure only this rank saw. `unreachable`:
  // a rank the notice would not reach (the far end of a dark link), left out
  // rather than waited for.
  void revoke(const std::string& message, int unreachable = -1);
  // A collective of this rank found the ranks out of step in the data path
  // (another call, count, type, op or root on a peer): the connections now
  // hold another call's data, so the communicator is unusable. Every
  // pending and later call fails with loomInvalidUsage and `what`, and
  // every other rank is told (Watchdog::reportMismatch), so that none waits
  // out its deadline.
  void poison(const std::string& what);
  // Whether a wait on this communicator would end at once (aborted, revoked, poisoned).
  bool cancelled() const { return cancel_.cancelled(); }
  // loomRemoteError once revoked, loomInvalidUsage once poisoned, else asyncError().
  loomResult_t state() const;
  // The out-of-band watch over the peers; null with a single rank.
  Watchdog* watchdog();
  // Where `peer`'s collectives are, asked out of band (Watchdog::probe);
  // nothing when it does not answer `within`.
  std::optional<Progress::Snapshot> probe(int peer, std::chrono::milliseconds within);
  // A call of this rank lost a peer, or its deadline passed: the cause is
  // often another rank's to tell. A rank that finds the ranks out of step
  // poisons its communicator, which ends what it was doing, connections it
  // was opening included; a rank that learns another died leaves the call;
  // the rank across a link that went dark names it. Either way a peer sees
  // the effect just before the notice of the cause arrives. Waits up to
  // 1 s for this communicator's state to be decided and throws the cause
  // (prefixed with `what`) when it comes; returns otherwise. A notice can
  // take a while on a loaded machine: 100 ms was seen too short under CI's
  // parallel tests.
  void awaitRootCause(const std::string& what);
  // A wait's deadline passed with nothing from or to `peer` (`stalled` says
  // so). When the peer answers nothing out of band either (a link, or a
  // host, gone dark: a dead process would have been declared by then), or
  // `inThisCall` finds its answer inside the very call that waits, the link
  // between the two is down: revokes this communicator with those words,
  // telling every rank (revoke), and throws loomRemoteError. Returns when
  // the peer is elsewhere (late, or it never made the call): a timeout.
  void throwIfLinkDown(int peer, const std::string& stalled,
                       const std::function<bool(const Progress::Snapshot&)>& inThisCall = {});
  // Numbers this rank's loomCommShrink calls on this communicator, so that
  // the survivors match their offers.
  uint32_t nextShrinkEpoch() { return shrinkEpoch_++; }

  // Runs this rank's share of a group that one thread posted for several
  // ranks of this process (comm/engine/group.cpp); started on first use.
  HostStream& groupWorker();

  void setLastError(const std::string& message);
  std::string lastError() const;

  // API calls in flight on this communicator; loomCommAbort waits for zero.
  std::atomic<int> activeCalls{0};
  // Host-stream tasks that use this communicator, queued or running;
  // finalize, destroy and abort wait for zero.
  std::atomic<int> streamTasks{0};

  // Where this rank's collectives are; the collectives layer keeps it.
  Progress progress;
  // The pinned buffers and copy stream through which this rank's device
  // buffers reach the host data path (the staged device path); host-only
  // calls never touch it.
  cuda::StagingArea staging;
  // What a wait for the device's copies runs between polls: it throws once
  // the communicator is aborted or revoked, or its timeout has passed since
  // this was called.
  std::function<void()> deviceWaitCheck() const;
  // One line per rank of where its collectives are, asked of every rank
  // (at most `within`) but those already known to have failed; just this
  // rank's with a single rank.
  std::vector<std::string> survey(std::chrono::milliseconds within);
  // The ranks the watchdog declared failed, in the order it did (loomCommGetFailedRanks).
  std::vector<int> failedRanks() const;

  // The device area of collectives that run on a CUDA stream with no host
  // in the loop, where every rank can take part (resident_area.hpp); null
  // elsewhere, and with LOOM_DEVICE_RESIDENT=0.
  ResidentArea* resident() const { return resident_ && resident_->ready() ? resident_.get() : nullptr; }

  // The entry gate (entry_gate.hpp), where some peers are threads of this
  // process on this rank's GPU; each does nothing elsewhere. This rank's
  // next call, and its next messages (resident ones as the area numbers
  // their pieces, the host's one piece each), entered before its group
  // queues anything: `holdsStream`, a call queued on a CUDA stream (which
  // waits there for its peers' parts); a call that holds none is only
  // numbered, so that every rank numbers the same calls.
  bool gated() const { return gate_ != nullptr; }
  void enterCall(bool holdsStream);
  void enterMessages(std::span<const EntryGate::Message> messages, bool holdsStream);
  // Waits until this thread may queue what it entered (EntryGate::pass),
  // at most the communicator's timeout.
  void passGate();
  // Forgets what this thread entered and has not passed.
  void leaveGate() noexcept;

  // The symmetric windows registered on this communicator
  // (loomCommWindowRegister): buffers the resident path reads in place.
  SymmetricWindows windows;

  // The collectives layer's state; `extensionMutex` guards its creation, and
  // `collectivesReady` publishes it, so that every later call finds it without the lock.
  std::mutex extensionMutex;
  std::unique_ptr<CommExtension> collectives;
  std::atomic<CommExtension*> collectivesReady{nullptr};

 private:
  [[noreturn]] void throwNotInitialized(loomResult_t state) const;
  void runInit(const UniqueIdData& id, int rank, int nranks);
  // Rank `from` found the ranks out of step (its poison()).
  void outOfStep(int from, const std::string& what);
  // A call of rank `from` lost a peer or link (its revoke(message)).
  void lostBy(int from, const std::string& what);
  // Opens the data listener (on the interface of this rank's NIC when it has
  // one here), exchanges endpoints, creates the engine.
  void startEngine(const UniqueIdData& id, const PeerInfo& self);
  // Joins the communicator's entry gate where some peers are threads of
  // this process on this rank's GPU.
  void startGate(const UniqueIdData& id, const PeerInfo& self);
  // Makes the resident collectives' device area where every rank is on this
  // node and sees a device (and LOOM_DEVICE_RESIDENT allows): collective.
  void startResident();
  // Every wait on this communicator ends (the cancellation), and so does every
  // stream's wait on its device flags (releaseResident): how an abort, a
  // revoke and a poison all end it.
  void cancelAll() noexcept;
  void cancelAll(loomResult_t code, const std::string& why) noexcept;
  // The communicator failed: no stream may wait on its flags any more.
  void releaseResident() noexcept;
  // The watchdog's turn: a resident call past the communicator's timeout
  // revokes it, naming the ranks it waits for.
  void checkResident();

  Config config_;
  int cudaDevice_;
  uint64_t creator_;  // the thread that asked for it (EntryGate::thisThread())
  std::shared_ptr<EntryGate> gate_;  // null: no peer is a thread of this process on this rank's GPU
  std::vector<bool> gatePeers_;      // per rank: such a peer (a call on a stream waits for its part)
  std::vector<bool> noPeers_;        // all false: a call that is only numbered
  Cancellation cancel_;
  int rank_ = -1;
  int size_ = 0;
  int localRank_ = -1;
  int localSize_ = 0;
  std::unique_ptr<Bootstrap> bootstrap_;
  topo::Placement placement_;
  std::unique_ptr<Engine> engine_;  // after bootstrap_: destroyed first
  std::mutex residentMutex_;  // resident_'s making against a failure's release
  std::unique_ptr<ResidentArea> resident_;
  std::atomic<loomResult_t> asyncError_{loomInProgress};
  mutable std::mutex errorMutex_;
  std::string lastError_;
  std::string initError_;
  std::thread initThread_;
  std::thread finalizeThread_;
  std::atomic<bool> finalizing_{false};  // state() is loomInProgress while a non-blocking finalize runs
  std::atomic<bool> aborted_{false};
  std::atomic<bool> poisoned_{false};  // set only after cancel_ holds the why
  uint32_t shrinkEpoch_ = 0;
  mutable std::mutex failedMutex_;
  std::vector<int> failed_;  // ranks the watchdog declared failed
  std::once_flag groupWorkerStarted_;
  std::unique_ptr<HostStream> groupWorker_;  // idle whenever no group call is under way
};

// Creates a listener on the interface chosen by LOOM_SOCKET_IFNAME (port 0:
// any free port), the first of them named in `preferred` if any is.
net::Socket listenOnBootstrapInterface(const std::string& label, std::span<const std::string> preferred = {});

}  // namespace loom

// The C handle is the communicator itself.
struct loomComm final : loom::Communicator {
  using Communicator::Communicator;
};
