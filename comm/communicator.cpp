#include "comm/communicator.hpp"

#include <unistd.h>

#include "base/affinity.hpp"
#include "base/deadline.hpp"
#include "base/device/cuda.hpp"
#include "base/device/runtime.hpp"
#include "base/device/stream_gate.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/net/interfaces.hpp"
#include "base/shm/segment.hpp"
#include "comm/bootstrap/root.hpp"
#include "comm/bootstrap/unique_id.hpp"
#include "comm/comm_topology.hpp"
#include "comm/host_id.hpp"

namespace loom {

net::Socket listenOnBootstrapInterface(const std::string& label, std::span<const std::string> preferred) {
  auto interfaces = net::selectInterfaces(env::get("LOOM_SOCKET_IFNAME"), net::listInterfaces());
  const net::Interface& chosen = net::preferNamed(interfaces, preferred);
  net::SocketAddress address = chosen.address;
  address.setPort(0);
  LOOM_INFO(Bootstrap, "%s on interface %s", label.c_str(), chosen.name.c_str());
  return net::Socket::listen(address, label);
}

Communicator::Communicator(Config config)
    : config_(config), cudaDevice_(cuda::deviceCount() > 0 ? cuda::currentDevice() : -1),
      creator_(EntryGate::thisThread()) {}

Communicator::~Communicator() {
  if (finalizeThread_.joinable()) finalizeThread_.join();  // its wait for stream work has a deadline
  groupWorker_.reset();  // idle: every group that used it waited for it
  if (initThread_.joinable()) {
    cancelAll();
    initThread_.join();
  }
  collectivesReady.store(nullptr, std::memory_order_relaxed);
  collectives.reset();  // it uses the engine's connections: goes first
  {
    std::lock_guard lock(residentMutex_);  // the watchdog may be releasing it
    resident_.reset();
  }
  engine_.reset();
  if (bootstrap_ && bootstrap_->watchdog() && aborted_.load(std::memory_order_acquire)) bootstrap_->watchdog()->abandon();
  bootstrap_.reset();  // its watchdog says goodbye, unless aborted
  reapRendezvousRoots();  // the root of this communicator's rendezvous, if it ran here
  // A peer that died between creating a shared segment and this rank's
  // unlinking it (a FIFO's name in flight when the watchdog cancelled the
  // connect) left the name behind: the survivor sweeps, rather than the
  // next process to start.
  if (!failedRanks().empty()) shm::removeStaleSegments();
}

void Communicator::abort() noexcept {
  aborted_.store(true, std::memory_order_release);
  cancelAll();
}

void Communicator::cancelOperations() {
  cancelAll(loomInvalidUsage, "aborted by loomCommShrink (LOOM_SHRINK_ABORT)");
  const auto deadline = Deadline::after(config_.timeout);
  // The caller's own call counts as one.
  while (activeCalls.load(std::memory_order_acquire) > 1 || streamTasks.load(std::memory_order_acquire) != 0) {
    if (deadline.expired()) throw Error(loomTimeout, "operations in flight did not end after LOOM_SHRINK_ABORT");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void Communicator::revoke(int rank, const std::string& why) {
  {
    std::lock_guard lock(failedMutex_);
    failed_.push_back(rank);
  }
  if (cancel_.cancelled()) return;
  LOOM_WARN(Init, "rank %d failed: %s; the communicator is revoked", rank, why.c_str());
  cancelAll(loomRemoteError, "rank " + std::to_string(rank) + " failed: " + why);
}

void Communicator::revoke(const std::string& message, int unreachable) {
  if (cancel_.cancelled()) return;  // told already, or aborted: nothing this rank alone knows
  // The peers first, as in poison(): a peer that lost its connection to
  // this rank when the cancel closes it must find the notice there.
  if (Watchdog* w = bootstrap_ ? bootstrap_->watchdog() : nullptr) w->reportLoss(message, unreachable);
  cancelAll(loomRemoteError, message);
}

void Communicator::lostBy(int from, const std::string& what) {
  if (cancel_.cancelled()) return;
  LOOM_WARN(Init, "a call of rank %d failed: %s; the communicator is revoked", from, what.c_str());
  cancelAll(loomRemoteError, "rank " + std::to_string(from) + " lost a peer or link: " + what);
}

void Communicator::poison(const std::string& what) {
  if (cancel_.cancelled()) return;
  // The peers first: cancelling here closes connections this rank was
  // opening, and a peer that saw one close before the notice came would
  // blame a lost peer.
  if (Watchdog* w = bootstrap_ ? bootstrap_->watchdog() : nullptr) w->reportMismatch(what);
  cancelAll(loomInvalidUsage, "the ranks are out of step: " + what);
  // Only after the cancel that carries the why: whoever sees poisoned_ (a
  // call that lost a peer and waits for this notice) must find it there.
  poisoned_.store(true, std::memory_order_release);
}

void Communicator::outOfStep(int from, const std::string& what) {
  if (cancel_.cancelled()) return;
  cancelAll(loomInvalidUsage, "the ranks are out of step, as rank " + std::to_string(from) + " found: " + what);
  poisoned_.store(true, std::memory_order_release);  // after the why, as in poison()
  LOOM_WARN(Init, "rank %d found the ranks out of step: %s; the communicator is unusable", from, what.c_str());
}

loomResult_t Communicator::state() const {
  const loomResult_t init = asyncError();
  if (init != loomSuccess) return init;
  if (poisoned_.load(std::memory_order_acquire)) return loomInvalidUsage;
  if (finalizing_.load(std::memory_order_acquire)) return loomInProgress;
  return cancel_.code() == loomRemoteError ? loomRemoteError : loomSuccess;
}

std::vector<std::string> Communicator::survey(std::chrono::milliseconds within) {
  requireInitialized();
  if (bootstrap_->watchdog() == nullptr) return {progress.describe()};
  return bootstrap_->watchdog()->survey(within, failedRanks());
}

std::vector<int> Communicator::failedRanks() const {
  std::lock_guard lock(failedMutex_);
  return failed_;
}

Watchdog* Communicator::watchdog() {
  requireInitialized();
  return bootstrap_->watchdog();
}

std::optional<Progress::Snapshot> Communicator::probe(int peer, std::chrono::milliseconds within) {
  Watchdog* w = watchdog();
  if (w == nullptr || peer == rank_) return std::nullopt;
  return w->probe(peer, within);
}

void Communicator::awaitRootCause(const std::string& what) {
  constexpr auto kNoticeWithin = std::chrono::milliseconds(1000);
  const auto until = std::chrono::steady_clock::now() + kNoticeWithin;
  while (state() == loomSuccess && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (state() != loomSuccess) cancel_.throwIfCancelled(what);
}

void Communicator::throwIfLinkDown(int peer, const std::string& stalled,
                                   const std::function<bool(const Progress::Snapshot&)>& inThisCall) {
  // How long the peer may take to answer: a live watchdog answers in well under a millisecond.
  constexpr std::chrono::milliseconds kAnswerWithin{200};
  const std::string link =
      "the link between rank " + std::to_string(rank_) + " and rank " + std::to_string(peer) + " is down";
  const auto at = probe(peer, kAnswerWithin);
  std::string why;
  if (!at) {
    why = "rank " + std::to_string(peer) + " does not answer out of band either: " + link + " (or its host is)";
  } else if (inThisCall && inThisCall(*at)) {
    why = "rank " + std::to_string(peer) + " is in this call too: " + link;
  } else {
    return;
  }
  // This rank is the one that knows: the others, waiting on ranks that wait
  // on this one, hear it now rather than at their own deadlines. The rank
  // across a dark link is not waited for.
  const std::string message = stalled + ": " + why;
  revoke(message, at ? -1 : peer);
  throw Error(loomRemoteError, message);
}

void Communicator::init(const UniqueIdData& id, int rank, int nranks) {
  try {
    runInit(id, rank, nranks);
  } catch (const Error& e) {
    asyncError_.store(e.code(), std::memory_order_release);
    throw;
  }
}

void Communicator::initAsync(const UniqueIdData& id, int rank, int nranks) {
  initThread_ = std::thread([this, id, rank, nranks] {
    LogRankScope scope(rank);
    // The rank's device, not this new thread's default: init places the rank on it.
    const cuda::DeviceScope device(cudaDevice_ >= 0 ? cudaDevice_ : cuda::currentDevice());
    try {
      runInit(id, rank, nranks);
    } catch (const Error& e) {
      setLastError(e.what());
      std::lock_guard lock(errorMutex_);
      initError_ = e.what();
      asyncError_.store(e.code(), std::memory_order_release);
    } catch (const std::exception& e) {
      setLastError(e.what());
      asyncError_.store(loomInternalError, std::memory_order_release);
    }
  });
}

void Communicator::finalizeAsync(std::function<void()> work) {
  if (finalizeThread_.joinable()) throw Error(loomInvalidUsage, "the communicator is finalized already");
  // Only what the caller sees is in progress: the calls still queued on
  // its streams run as on a ready communicator.
  finalizing_.store(true, std::memory_order_release);
  finalizeThread_ = std::thread([this, work = std::move(work)] {
    LogRankScope scope(rank_);
    try {
      work();
      finalizing_.store(false, std::memory_order_release);
    } catch (const Error& e) {
      setLastError(e.what());
      std::lock_guard lock(errorMutex_);
      initError_ = e.what();
      asyncError_.store(e.code(), std::memory_order_release);
      finalizing_.store(false, std::memory_order_release);
    }
  });
}

void Communicator::runInit(const UniqueIdData& id, int rank, int nranks) {
  LogRankScope scope(rank);
  rank_ = rank;
  size_ = nranks;
  auto listener = listenOnBootstrapInterface("bootstrap listener of rank " + std::to_string(rank));
  PeerInfo self;
  self.rank = rank;
  self.pid = static_cast<int>(::getpid());
  self.hostId = hostId();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  self.hostname = host;
  self.bootstrapAddress = listener.localAddress().toString();
  self.cudaDeviceCount = cuda::deviceCount();
  if (self.cudaDeviceCount > 0) self.cudaDeviceId = cuda::runtime().deviceId(cuda::currentDevice());
  // Before any call can hold a stream: loading a kernel lazily, or pinning
  // memory, later could wait for a stream that waits for Loom (stream_gate.hpp).
  if (self.cudaDeviceCount > 0) cuda::prepareStreamGates();

  bootstrap_ = std::make_unique<Bootstrap>(id, rank, nranks, self, std::move(listener), config_.timeout, &cancel_);
  bootstrap_->watch(Watchdog::Settings::fromEnv(config_.timeout),
                    {.onFailure = [this](int failed, const std::string& why) { revoke(failed, why); },
                     .onMismatch = [this](int from, const std::string& what) { outOfStep(from, what); },
                     .onLoss = [this](int from, const std::string& what) { lostBy(from, what); },
                     .progress = &progress,
                     .tick = [this] { checkResident(); }});

  localSize_ = 0;
  for (const auto& p : bootstrap_->peers()) {
    if (p.hostId == self.hostId) {
      if (p.rank == rank) localRank_ = localSize_;
      ++localSize_;
    }
  }
  placement_ = planTopology(*bootstrap_, self.hostId, localRank_, localSize_);

  startEngine(id, self);
  startGate(id, self);
  startResident();
  LOOM_INFO(Init, "communicator ready: rank %d of %d, local rank %d of %d", rank_, size_, localRank_, localSize_);
  asyncError_.store(loomSuccess, std::memory_order_release);
}

void Communicator::startGate(const UniqueIdData& id, const PeerInfo& self) {
  std::vector<bool> peers(static_cast<size_t>(size_), false);
  bool any = false;
  for (const PeerInfo& p : bootstrap_->peers()) {
    const bool besides = p.rank != rank_ && p.hostId == self.hostId && p.pid == self.pid && self.cudaDeviceId != 0 &&
                         p.cudaDeviceId == self.cudaDeviceId;
    peers[static_cast<size_t>(p.rank)] = besides;
    any = any || besides;
  }
  if (!any) return;
  const loomUniqueId key = encodeUniqueId(id);
  std::shared_ptr<EntryGate> gate = EntryGate::of(std::string(key.internal, sizeof key.internal));
  gate->noteCreator(rank_, creator_);
  gatePeers_ = std::move(peers);
  noPeers_.assign(static_cast<size_t>(size_), false);
  std::lock_guard lock(residentMutex_);  // an abort during init may be failing it (releaseResident)
  gate_ = std::move(gate);
  if (cancel_.cancelled()) gate_->fail(rank_);
}

void Communicator::enterCall(bool holdsStream) {
  if (gate_) gate_->enterCall(rank_, holdsStream ? gatePeers_ : noPeers_);
}

void Communicator::enterMessages(std::span<const EntryGate::Message> messages, bool holdsStream) {
  if (gate_) gate_->enterMessages(rank_, messages, holdsStream ? gatePeers_ : noPeers_);
}

void Communicator::passGate() {
  if (gate_) gate_->pass(rank_, config_.timeout);
}

void Communicator::leaveGate() noexcept {
  if (gate_) gate_->leave();
}

void Communicator::startResident() {
  if (size_ < 2 || localSize_ != size_ || env::getInt("LOOM_DEVICE_RESIDENT", 0, 1) == 0) return;
  for (const PeerInfo& p : bootstrap_->peers()) {
    if (p.cudaDeviceCount == 0) return;
  }
  const auto twoShotFrom = static_cast<uint64_t>(env::getInt("LOOM_DEVICE_TWO_SHOT_BYTES", 0, 1LL << 50));
  const auto scratch = static_cast<size_t>(env::getInt("LOOM_DEVICE_SCRATCH_BYTES", 65536, 1LL << 32)) & ~size_t{4095};
  const bool twoShotChosen = env::getIfSet("LOOM_DEVICE_TWO_SHOT_BYTES").has_value();
  auto area = std::make_unique<ResidentArea>(*bootstrap_, scratch, twoShotFrom, twoShotChosen);
  std::lock_guard lock(residentMutex_);
  resident_ = std::move(area);
  if (cancel_.cancelled()) resident_->release();
}

void Communicator::checkResident() {
  std::optional<std::string> overdue;
  {
    std::lock_guard lock(residentMutex_);
    if (resident_ == nullptr || cancel_.cancelled()) return;
    overdue = resident_->overdue(config_.timeout);
  }
  if (overdue) revoke(*overdue);
}

void Communicator::cancelAll() noexcept {
  cancel_.cancel();
  releaseResident();
}

void Communicator::cancelAll(loomResult_t code, const std::string& why) noexcept {
  cancel_.cancel(code, why);
  releaseResident();
}

void Communicator::releaseResident() noexcept {
  std::lock_guard lock(residentMutex_);
  if (resident_) resident_->release();
  if (gate_) gate_->fail(rank_);  // no thread waits for this rank, nor for itself, at the gate
}

void Communicator::startEngine(const UniqueIdData& id, const PeerInfo& self) {
  const int nic = processSystem().find(topo::NodeKind::Nic, placement_.ranks[static_cast<size_t>(rank_)].nic);
  const std::vector<std::string> netdevs = nic >= 0 ? processSystem().nodes[static_cast<size_t>(nic)].netdevs
                                                    : std::vector<std::string>{};
  auto listener = listenOnBootstrapInterface("data listener of rank " + std::to_string(rank_), netdevs);
  transport::Context context;
  context.self = {.rank = rank_, .hostId = self.hostId, .pid = self.pid, .listener = listener.localAddress()};
  context.secret = id.secret;
  context.timeout = config_.timeout;
  context.cancel = &cancel_;
  context.fifo = transport::FifoShape::fromEnv();
  context.socketsPerPeer = static_cast<int>(env::getInt("LOOM_SOCKET_NSOCKS", 1, 16));
  context.cpus = topo::cpusFor(processSystem(), placement_.ranks[static_cast<size_t>(rank_)], threadCpus());
  auto endpoints = transport::exchangeEndpoints(*bootstrap_, context.self, size_);
  engine_ = std::make_unique<Engine>(std::move(context), std::move(endpoints), std::move(listener));
}

const std::vector<PeerInfo>& Communicator::peers() const {
  requireInitialized();  // as placement(): fixed at init
  return bootstrap_->peers();
}

const topo::Placement& Communicator::placement() const {
  requireInitialized();  // a value that never changes: queries after a failure read it too
  return placement_;
}

Bootstrap& Communicator::bootstrap() {
  requireReady();
  return *bootstrap_;
}

const char* Communicator::transportTo(int peer) const {
  requireInitialized();
  return engine_->transportTo(peer);
}

std::function<void()> Communicator::deviceWaitCheck() const {
  return [this, deadline = Deadline::after(config_.timeout)] {
    requireReady();
    if (deadline.expired()) {
      throw Error(loomTimeout, "the device's copies (and the work queued before them) took longer than the "
                               "communicator's timeout");
    }
  };
}

void Communicator::throwNotInitialized(loomResult_t state) const {
  if (state == loomInProgress) {
    throw Error(loomInProgress, "communicator is still initializing (poll loomCommGetAsyncError)");
  }
  std::lock_guard lock(errorMutex_);
  throw Error(loomInvalidUsage, "communicator failed to initialize or finalize: " + initError_);
}

HostStream& Communicator::groupWorker() {
  std::call_once(groupWorkerStarted_, [this] { groupWorker_ = std::make_unique<HostStream>(); });
  return *groupWorker_;
}

void Communicator::setLastError(const std::string& message) {
  std::lock_guard lock(errorMutex_);
  lastError_ = message;
}

std::string Communicator::lastError() const {
  std::lock_guard lock(errorMutex_);
  return lastError_;
}

}  // namespace loom
