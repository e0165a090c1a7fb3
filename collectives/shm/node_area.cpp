#include "collectives/shm/node_area.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

// ThreadSanitizer: GCC says so with __SANITIZE_THREAD__, Clang with __has_feature.
#if defined(__SANITIZE_THREAD__)
#define LOOM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LOOM_TSAN 1
#endif
#endif
#if defined(LOOM_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <thread>

#include "base/env.hpp"
#include "base/error.hpp"
#include "base/device/cuda.hpp"
#include "base/device/peer_access.hpp"
#include "base/log.hpp"
#include "base/process.hpp"
#include "collectives/call_signature.hpp"
#include "collectives/collective.hpp"
#include "collectives/cuda/kernels.hpp"  // kMaxSources: what one device kernel folds
#include "base/backoff.hpp"

namespace loom::coll::shm {
namespace {

template <class T>
struct alignas(kCacheLine) Line {
  std::atomic<T> value;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared counters must be lock-free (address-free)");

// A rank's arrival at one step in kArrivalDepth. What a peer needs once it
// sees the step, the call it announces and a small step's staged input,
// follows the counter in its cache line (and the next, for 33 to 96 bytes),
// so that it arrives with the counter: one transfer between cores instead of
// three. Plain data, published and read under the counter's release/acquire.
struct alignas(kCacheLine) ArrivalLine {
  std::atomic<uint64_t> step;
  CallInfo call;  // when `step` is its call's first
  std::byte staged[kArrivalBytes];
};
static_assert(offsetof(ArrivalLine, staged) == 32 && sizeof(ArrivalLine) == 2 * kCacheLine,
              "an arrival is two cache lines, the counter's holding 32 staged bytes");

struct alignas(kCacheLine) BuffersLine {
  CallBuffers buffers;  // published with the call's first arrival
};

struct RankControl {
  ArrivalLine arrived[kArrivalDepth];  // step s in line s % depth
  Line<uint64_t> reduced;
  Line<uint32_t> left;
  Line<uint32_t> reading;
  Line<uint32_t> failed;
  BuffersLine buffers[kArrivalDepth];  // published with the arrival of the same index
};

// Each rank maps the segment at its own address, so ThreadSanitizer cannot
// link a post on one mapping to the wait that sees it on another; ranks that
// are threads of one process then read each other's buffers "unsynchronized".
// This one object stands in for the counters: released by every post,
// acquired by every completed wait.
#if defined(LOOM_TSAN)
char tsanCounters;
void releaseCounters() { __tsan_release(&tsanCounters); }
void acquireCounters() { __tsan_acquire(&tsanCounters); }
#else
void releaseCounters() {}
void acquireCounters() {}
#endif

constexpr size_t kNameBytes = 64;
constexpr int kQuickLooks = 256;
constexpr auto kSleepSlice = std::chrono::milliseconds(10);  // how often a sleeper checks deadlines and peers

size_t roundUp(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

// The process-shared futex (not FUTEX_PRIVATE: the word lives in a segment
// that other processes map).
long futex(std::atomic<uint32_t>& word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op, value, timeout, nullptr, 0);
}

}  // namespace

size_t buffersFor(int ranks, size_t slotBytes) {
  const size_t perBuffer = (static_cast<size_t>(ranks) + 1) * slotBytes;
  return std::bit_floor(std::clamp<size_t>((kDataAreaBytes + perBuffer - 1) / perBuffer, 2, kMostBuffers));
}

struct NodeArea::Control {
  Line<uint32_t> sleepers;    // ranks inside a futex wait (or about to be)
  Line<uint32_t> generation;  // the futex word: bumped by a post that finds sleepers

  RankControl& rank(int local) { return reinterpret_cast<RankControl*>(this + 1)[local]; }
  // The counter that says whether `local` has reached `step` on `c`.
  std::atomic<uint64_t>& counter(int local, Counter c, uint64_t step) {
    return c == Counter::Arrived ? rank(local).arrived[step % kArrivalDepth].step : rank(local).reduced.value;
  }
};

NodeArea::NodeArea(Communicator& comm, size_t slotBytes) : comm_(comm), slotBytes_(slotBytes) {
  const auto& peers = comm.peers();
  const uint64_t host = peers[static_cast<size_t>(comm.rank())].hostId;
  for (const auto& p : peers) {
    if (p.hostId != host) continue;
    if (p.rank == comm.rank()) localRank_ = static_cast<int>(localToRank_.size());
    localToRank_.push_back(p.rank);
  }
  localSize_ = static_cast<int>(localToRank_.size());
  buffers_ = buffersFor(localSize_, slotBytes_);
  const size_t controlBytes = roundUp(sizeof(Control) + sizeof(RankControl) * localToRank_.size(), 4096);
  const size_t bytes = controlBytes + buffers_ * (localToRank_.size() + 1) * slotBytes_;

  // The lowest rank of each node creates; everyone learns the names in one
  // allgather, maps, and reports in a second, then maps every page and
  // reports in a third, so that a failure anywhere fails every rank instead
  // of leaving some waiting.
  const auto self = static_cast<size_t>(comm.rank());
  std::vector<std::byte> blocks(peers.size() * kNameBytes);
  std::string error;
  if (localRank_ == 0) {
    try {
      segment_ = loom::shm::Segment::create(bytes, loom::shm::Segment::Populate::ByFirstWriter);
      std::memcpy(&blocks[self * kNameBytes], segment_.name().data(), std::min(segment_.name().size(), kNameBytes - 1));
    } catch (const Error& e) {
      error = e.what();
    }
  }
  comm.bootstrap().allgather(blocks, kNameBytes);
  if (localRank_ != 0) {
    const auto* leader = reinterpret_cast<const char*>(&blocks[static_cast<size_t>(localToRank_[0]) * kNameBytes]);
    const std::string name(leader, strnlen(leader, kNameBytes));
    if (name.empty()) {
      error = "rank " + std::to_string(localToRank_[0]) + " could not create its node's shared segment";
    } else {
      try {
        segment_ = loom::shm::Segment::open(name, bytes);
      } catch (const Error& e) {
        error = e.what();
      }
    }
  }
  if (error.empty()) firstTouch(controlBytes);
  // Every rank says whether it got this far, so that a failure anywhere
  // fails every rank at the same point; and, in a second byte, whether its
  // process registered for membarrier's heavy fence (postFence_).
  const bool fenceRegistered = AsymmetricFence::registerProcess();
  const auto agree = [&](const std::string& failedAt) {
    std::fill(blocks.begin(), blocks.end(), std::byte{0});
    blocks[self * kNameBytes] = std::byte{error.empty() ? uint8_t{1} : uint8_t{0}};
    blocks[self * kNameBytes + 1] = std::byte{fenceRegistered ? uint8_t{1} : uint8_t{0}};
    comm.bootstrap().allgather(blocks, kNameBytes);
    if (!error.empty()) throw Error(loomSystemError, "shared-memory collectives: " + error);
    for (size_t r = 0; r < peers.size(); ++r) {
      if (blocks[r * kNameBytes] == std::byte{0}) {
        throw Error(loomSystemError, "shared-memory collectives: rank " + std::to_string(r) + " could not " + failedAt);
      }
    }
  };
  agree("map its node's shared segment");  // on a throw, the segment's end removes the name
  segment_.unlink();  // everyone has mapped it; the creator's unlink removes the name
  // Every rank has touched its own slots (firstTouch): now each maps every
  // page, its peers' lines and slots too, so that no call faults on one.
  try {
    segment_.mapEveryPage();
  } catch (const Error& e) {
    error = e.what();
  }
  agree("map every page of its node's shared segment");
  const bool everyFenceRegistered = std::all_of(localToRank_.begin(), localToRank_.end(), [&](int rank) {
    return blocks[static_cast<size_t>(rank) * kNameBytes + 1] == std::byte{1};
  });
  postFence_ = AsymmetricFence(everyFenceRegistered);
  spin_ = !oversubscribed(localSize_);
  timeout_ = comm.engine().context().timeout;
  singleCopy_ = env::getInt("LOOM_SHM_SINGLE_COPY", 0, 1) == 1;
  sources_.resize(localToRank_.size());
  control_ = reinterpret_cast<Control*>(segment_.data());
  data_ = segment_.data() + controlBytes;
  LOOM_INFO(Coll, "node segment %s: %d local ranks, %zu x %d slots of %zu bytes, %s", segment_.name().c_str(),
            localSize_, buffers_, localSize_ + 1, slotBytes_,
            postFence_.split() ? "posts fenced by the sleepers' membarrier" : "posts fully fenced");
}

// Each rank writes its own staging slots first, so their pages sit on its
// NUMA node (first-touch policy), where it writes them every step; the
// creator takes the result slots. Zeros over zeros: nothing else changes.
void NodeArea::firstTouch(size_t controlBytes) {
  std::byte* data = segment_.data() + controlBytes;
  const size_t slots = static_cast<size_t>(localSize_) + 1;
  for (size_t buffer = 0; buffer < buffers_; ++buffer) {
    std::memset(data + (buffer * slots + static_cast<size_t>(localRank_)) * slotBytes_, 0, slotBytes_);
    if (localRank_ == 0) std::memset(data + (buffer * slots + slots - 1) * slotBytes_, 0, slotBytes_);
  }
}

NodeArea::~NodeArea() {
  if (control_ == nullptr) return;
  control_->rank(localRank_).left.value.store(1, std::memory_order_release);
  wake();
}

// Dekker's handshake, sequentially consistent on both sides: a reader raises
// `reading` and then looks for `failed`; a failing rank raises `failed` and
// then waits for `reading` to fall. Either the reader sees the failure and
// reads nothing, or the failing rank sees the reader and waits for it.
PeerReads::PeerReads(NodeArea& node, const std::string& what) : node_(node) {
  auto& mine = node.control_->rank(node.localRank_).reading.value;
  mine.store(1, std::memory_order_seq_cst);
  for (int local = 0; local < node.localSize_; ++local) {
    if (node.control_->rank(local).failed.value.load(std::memory_order_seq_cst) != 0) {
      mine.store(0, std::memory_order_release);
      throw Error(loomRemoteError, what + ": rank " + std::to_string(node.localToRank_[static_cast<size_t>(local)]) +
                                       " failed out of a collective on the node's shared segment");
    }
  }
}

PeerReads::~PeerReads() {
  releaseCounters();
  node_.control_->rank(node_.localRank_).reading.value.store(0, std::memory_order_release);
}

DeviceReads::~DeviceReads() { node_.closeDeviceMappings(); }

void NodeArea::abandonCall() noexcept {
  if (control_ == nullptr || offered_.offered != 1 || callStep_ == 0) return;
  // Peers learn of the offer with this rank's first step: not posted, not read.
  if (control_->counter(localRank_, Counter::Arrived, callStep_).load(std::memory_order_relaxed) < callStep_) return;
  control_->rank(localRank_).failed.value.store(1, std::memory_order_seq_cst);
  wake();
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  // A peer that died (or that the watchdog declared failed) while reading
  // reads no more, though its flag stays up.
  const auto gone = [this](int local) {
    const int rank = localToRank_[static_cast<size_t>(local)];
    const int pid = comm_.peers()[static_cast<size_t>(rank)].pid;
    if (pid != ::getpid() && processHasExited(pid)) return true;
    const std::vector<int> failed = comm_.failedRanks();
    return std::find(failed.begin(), failed.end(), rank) != failed.end();
  };
  for (int local = 0; local < localSize_; ++local) {
    if (local == localRank_) continue;
    const RankControl& peer = control_->rank(local);
    for (int look = 0; peer.reading.value.load(std::memory_order_seq_cst) != 0 &&
                       peer.left.value.load(std::memory_order_acquire) == 0;
         ++look) {
      if (look % 100 == 99 && gone(local)) break;  // every 10 ms
      if (std::chrono::steady_clock::now() > deadline) {
        LOOM_WARN(Coll, "rank %d still reads this rank's buffers after %lld ms; returning anyway",
                  localToRank_[static_cast<size_t>(local)],
                  static_cast<long long>(timeout_.count()));
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));  // a read of a few MiB takes about a millisecond
    }
  }
  acquireCounters();
}

std::byte* NodeArea::stage(int local, uint64_t step) const {
  const size_t buffer = step & (buffers_ - 1);  // buffers_ is a power of two
  return data_ + (buffer * static_cast<size_t>(localSize_ + 1) + static_cast<size_t>(local)) * slotBytes_;
}

std::byte* NodeArea::stage(int local, uint64_t step, size_t bytes) const {
  if (bytes > kArrivalBytes) return stage(local, step);
  return control_->rank(local).arrived[step % kArrivalDepth].staged;
}

std::byte* NodeArea::result(uint64_t step) const { return stage(localSize_, step); }

void NodeArea::post(Counter counter, uint64_t step) {
  releaseCounters();
  control_->counter(localRank_, counter, step).store(step, std::memory_order_release);
  postFence_.light();  // the sleeper's heavy half makes it a full fence (sleep())
  wake();
}

// Pairs with sleep() (Dekker's pattern): the poster stores its counter then
// reads `sleepers`, a sleeper increments `sleepers` then reads the counter,
// each with a fence between (postFence_'s two halves), so either the poster
// sees the sleeper or the sleeper's last look sees the post.
void NodeArea::wake() {
  if (control_->sleepers.value.load(std::memory_order_seq_cst) == 0) return;
  control_->generation.value.fetch_add(1, std::memory_order_seq_cst);
  futex(control_->generation.value, FUTEX_WAKE, INT_MAX, nullptr);
}

void NodeArea::sleep(int local, Counter counter, uint64_t step) {
  auto& sleepers = control_->sleepers.value;
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  postFence_.heavy();  // every poster's store before it is seen below, or the poster sees this sleeper
  const uint32_t generation = control_->generation.value.load(std::memory_order_seq_cst);
  if (control_->counter(local, counter, step).load(std::memory_order_seq_cst) < step) {
    const timespec slice = toTimespec(kSleepSlice);
    futex(control_->generation.value, FUTEX_WAIT, generation, &slice);  // EAGAIN/ETIMEDOUT/EINTR: look again
  }
  sleepers.fetch_sub(1, std::memory_order_relaxed);
}

void NodeArea::startCall(const CallInfo& call, uint64_t callBytes) {
  call_ = call;
  probe_.emplace(comm_, static_cast<uint32_t>(call.sequence), call.call, callBytes, StallProbe::Waits::ForSteps);
  callStep_ = 0;
  offered_.offered = 0;  // the rest is read only where this says a rank offered
  peersInPlace_ = false;
  deviceOffered_ = false;
  peerBuffers_.device = false;
  mappings_.closeDeviceMappings();
}

void NodeArea::offerBuffers(const void* send, size_t sendBytes, const void* recv, size_t recvBytes) {
  offered_ = {.offered = singleCopy_ ? 1u : 2u,
              .pid = ::getpid(),
              .send = memory::handleOf(send, sendBytes),
              .recv = memory::handleOf(recv, recvBytes)};
}

void NodeArea::resolveBuffers(uint64_t step) {
  // Every rank sees the same published buffers and decides from them alone,
  // never from which rank it is, so every rank decides the same: heap
  // buffers are readable only when all the ranks are one process's threads.
  // (Cross-memory reads, process_vm_readv, were measured slower than staging:
  // the staged copy stays in cache, and pinning pages costs.) Device buffers
  // are read in place only when every rank's are, and only if each rank's
  // kernels can reach every GPU holding them (its own, or peers CUDA lets it
  // access): that a rank decides alone, and agreeOnDeviceMappings settles.
  const auto shared = [](const memory::Handle& h) { return h.empty() || h.reachableByPeers(); };
  bool allOffered = true;
  bool everyRankShown = true;  // each offered a buffer, so that its memory's kind is known
  bool oneProcess = true;
  bool allShared = true;
  bool anyDevice = false;
  bool allDevice = true;
  bool reachable = true;  // by this rank's kernels
  for (int local = 0; local < localSize_; ++local) {
    const CallBuffers& theirs = control_->rank(local).buffers[step % kArrivalDepth].buffers;
    if (theirs.offered == 0) {  // its handles are an earlier call's
      allOffered = false;
      everyRankShown = false;
      continue;
    }
    allOffered = allOffered && theirs.offered == 1;
    everyRankShown = everyRankShown && !(theirs.send.empty() && theirs.recv.empty());
    oneProcess = oneProcess && theirs.pid == control_->rank(0).buffers[step % kArrivalDepth].buffers.pid;
    allShared = allShared && shared(theirs.send) && shared(theirs.recv);
    for (const memory::Handle* h : {&theirs.send, &theirs.recv}) {
      if (h->empty()) continue;
      const bool device = h->kind == memory::MemoryKind::CudaDevice;
      anyDevice = anyDevice || device;
      allDevice = allDevice && device;
      reachable = reachable && (!device || loom::cuda::canReadInPlace(h->device, h->pooled));
    }
  }
  deviceOffered_ = anyDevice;
  if (!allOffered || (!allShared && !oneProcess)) return;
  if (anyDevice && !(allDevice && everyRankShown && static_cast<size_t>(localSize_) <= coll::cuda::kMaxSources)) {
    return;
  }
  const auto map = [this](const memory::Handle& h) {
    return h.empty() ? nullptr : mappings_.map(h);
  };
  peerBuffers_.send.resize(static_cast<size_t>(localSize_));
  peerBuffers_.recv.resize(static_cast<size_t>(localSize_));
  // Device buffers: what CUDA IPC may refuse here (another container's
  // process, a driver's limit) is settled by agreeOnDeviceMappings, where
  // every rank learns whether all mapped; host memory fails the call as before.
  peerBuffers_.device = anyDevice;
  if (!reachable) {
    if (!announcedUnreachable_) {
      announcedUnreachable_ = true;
      LOOM_INFO(Coll,
                "a local rank's device buffers are on a GPU that this rank's (device %d) cannot access as a peer, "
                "so the node stages them",
                loom::cuda::currentDevice());
    }
    return;
  }
  try {
    for (int local = 0; local < localSize_; ++local) {
      const CallBuffers& theirs = control_->rank(local).buffers[step % kArrivalDepth].buffers;
      peerBuffers_.send[static_cast<size_t>(local)] = map(theirs.send);
      peerBuffers_.recv[static_cast<size_t>(local)] = map(theirs.recv);
    }
  } catch (const Error& e) {
    if (!anyDevice) throw;
    LOOM_WARN(Coll, "cannot read a local rank's device buffers in place, so the node stages them: %s", e.what());
    return;
  }
  peersInPlace_ = true;
  if (!announcedShared_) {
    announcedShared_ = true;
    LOOM_INFO(Coll, "reading the %d local ranks' buffers in place (%s)", localSize_,
              anyDevice ? (oneProcess ? "device memory, one process" : "device memory, CUDA IPC or the fake device's memfds")
                        : (allShared ? "loomMemAlloc" : "one process"));
  }
}

bool NodeArea::agreeOnDeviceMappings(const std::string& what) {
  if (!peerBuffers_.device) return peersInPlace_;
  const uint64_t step = nextStep();
  *stage(localRank_, step, 1) = std::byte{peersInPlace_ ? uint8_t{1} : uint8_t{0}};
  arrive(step, what);
  for (int local = 0; local < localSize_; ++local) {
    if (*stage(local, step, 1) == std::byte{0}) peersInPlace_ = false;
  }
  if (!peersInPlace_) mappings_.closeDeviceMappings();
  return peersInPlace_;
}

uint64_t NodeArea::nextStep() {
  settle(step_);  // every rank has arrived at every earlier step: the slots of step_ + 1's parity are free
  return nextLineStep();
}

uint64_t NodeArea::nextLineStep() {
  const uint64_t step = ++step_;
  // The line of `step` last held step - depth, which every rank has read
  // once it has arrived one step later. Where that is still to be seen,
  // half the depth is settled at once: a look at a peer's line costs the
  // peer's next store there a round trip between cores (the line is shared
  // by then), so a rank that looked at one line a step would slow a peer
  // that only receives by one such trip a call; so it looks once in half
  // the depth's steps.
  if (step > kArrivalDepth && deferredCount_ != 0 &&
      deferred_[deferredFirst_ % kArrivalDepth].step <= step - kArrivalDepth + 1) {
    settle(step - kArrivalDepth / 2);
  }
  if (callStep_ == 0) {
    callStep_ = step;
    // Published by post(Arrived, step).
    control_->rank(localRank_).arrived[step % kArrivalDepth].call = call_;
    // A rank that offers nothing says so in one word (the handles are some
    // 300 bytes, which a small call need not copy).
    CallBuffers& published = control_->rank(localRank_).buffers[step % kArrivalDepth].buffers;
    if (offered_.offered == 0) {
      published.offered = 0;
    } else {
      published = offered_;
    }
  }
  return step;
}

void NodeArea::postAndDefer(uint64_t step) {
  if (deferredCount_ == kArrivalDepth) settle(deferred_[deferredFirst_ % kArrivalDepth].step);
  deferred_[(deferredFirst_ + deferredCount_) % kArrivalDepth] = {
      .step = step, .call = call_.call, .sequence = static_cast<uint32_t>(call_.sequence)};
  ++deferredCount_;
  post(Counter::Arrived, step);
}

// The check of the calls cannot wait for settle(): by then a peer may have
// reused its line. So a departing rank checks the peers already there, and
// the rest check it or a rank whose call equals its own:
// - a rank that arrives checks every rank;
// - of two departing ranks, at least one sees the other (each posts, then
//   looks, both sequentially consistent);
// - a rank that arrives from one (arriveFrom) checks that one, its call's
//   root (a broadcast's or scatter's receiver); if their calls are equal,
//   that rank is the root of the same call, so it departs or arrives.
// So through a chain of equal calls every rank's is compared with every
// other's, and the first step of a call finds any mismatch, on some rank.
void NodeArea::depart(uint64_t step, const std::string& what) {
  postAndDefer(step);
  if (step != callStep_) return;
  for (int local = 0; local < localSize_; ++local) {
    if (local == localRank_ || control_->counter(local, Counter::Arrived, step).load(std::memory_order_seq_cst) < step) {
      continue;
    }
    acquireCounters();
    checkCalls(step, what, local);
  }
}

void NodeArea::arriveFrom(int local, uint64_t step, const std::string& what) {
  postAndDefer(step);
  waitFor(local, Counter::Arrived, step, what);
  if (step == callStep_) checkCalls(step, what, local);
}

void NodeArea::settle(uint64_t step) {
  uint64_t due = 0;  // the deferred steps up to `step`, oldest first
  while (due < deferredCount_ && deferred_[(deferredFirst_ + due) % kArrivalDepth].step <= step) ++due;
  if (due == 0) return;
  // A rank posts its arrivals in step order, so one that reached the newest
  // due step reached every one before it: one look at each peer settles
  // them all.
  const Deferred& newest = deferred_[(deferredFirst_ + due - 1) % kArrivalDepth];
  if (!allReached(Counter::Arrived, newest.step)) {
    // Waited for first at the oldest step a peer has not reached, so that a
    // failure names the call that peer never reached.
    for (uint64_t i = 0; i + 1 < due; ++i) {
      const Deferred& d = deferred_[(deferredFirst_ + i) % kArrivalDepth];
      if (!allReached(Counter::Arrived, d.step)) {
        waitForDeferred(d);
        break;
      }
    }
    if (!allReached(Counter::Arrived, newest.step)) waitForDeferred(newest);
  }
  deferredFirst_ += due;
  deferredCount_ -= due;
}

void NodeArea::waitForDeferred(const Deferred& d) {
  try {
    waitAll(Counter::Arrived, d.step, describeCall(d.call, d.sequence));
  } catch (...) {
    deferredCount_ = 0;  // the node's collectives fail from here on: nothing later to settle
    throw;
  }
}

void NodeArea::awaitArrivals(uint64_t step, const std::string& what) {
  waitAll(Counter::Arrived, step, what);
  if (step == callStep_) {
    checkCalls(step, what);
    // Peers' buffers are read only if every rank offered its own, so a rank
    // that offered none need not look (and leaves their lines in their caches).
    if (offered_.offered != 0) resolveBuffers(step);
  }
}

void NodeArea::checkCalls(uint64_t step, const std::string& what, int only) const {
  const auto check = [&](int local) {
    const CallInfo& theirs = control_->rank(local).arrived[step % kArrivalDepth].call;
    if (!(theirs == call_)) [[unlikely]] throwMismatch(local, theirs, what);
  };
  if (only >= 0) {
    check(only);
    return;
  }
  for (int local = 0; local < localSize_; ++local) {
    if (local != localRank_) check(local);
  }
}

void NodeArea::throwMismatch(int local, const CallInfo& theirs, const std::string& what) const {
  const auto describe = [](const CallInfo& c) {
    return describeCall(c.call, static_cast<uint32_t>(c.sequence)) + " of " + std::to_string(c.bytes) +
           " bytes, root " + std::to_string(c.root);
  };
  throw Error(loomInvalidUsage, what + ": rank " + std::to_string(localToRank_[static_cast<size_t>(local)]) +
                                    " called " + describe(theirs) + " where this rank called " + describe(call_) +
                                    " (every rank must make the same calls in the same order, with matching "
                                    "counts, types, ops, roots and peers)");
}

bool NodeArea::reached(int local, Counter counter, uint64_t step) const {
  return control_->counter(local, counter, step).load(std::memory_order_acquire) >= step;
}

bool NodeArea::allReached(Counter counter, uint64_t step) const {
  for (int local = 0; local < localSize_; ++local) {
    if (local != localRank_ && !reached(local, counter, step)) return false;
  }
  acquireCounters();
  return true;
}

void NodeArea::waitAll(Counter counter, uint64_t step, const std::string& what) {
  for (int local = 0; local < localSize_; ++local) {
    if (local != localRank_) waitFor(local, counter, step, what);
  }
}

void NodeArea::waitFor(int local, Counter counter, uint64_t step, const std::string& what) {
  // Most waits of a small call find the peer there (a root ahead, a step
  // settled long after): one look, without the frame the wait loop needs.
  if (reached(local, counter, step)) {
    acquireCounters();
    return;
  }
  waitUntilReached(local, counter, step, what);
}

void NodeArea::waitUntilReached(int local, Counter counter, uint64_t step, const std::string& what) {
  // A peer on another core usually posts within a fraction of a microsecond:
  // look a few hundred times before the clock-reading back-off starts.
  for (int i = 0; i < (spin_ ? kQuickLooks : 1); ++i) {
    if (reached(local, counter, step)) {
      acquireCounters();
      return;
    }
    cpuRelax();
  }
  Backoff backoff(spin_);
  const auto since = std::chrono::steady_clock::now();
  while (!reached(local, counter, step)) {
    // A sleeper also asks whether the peer's process still lives; it sleeps
    // on the segment's futex (posts wake it), not for the back-off's time.
    backoff.idle([&](Backoff::Phase phase) { check(local, counter, step, phase == Backoff::Phase::Sleep, since, what); },
                 [&](std::chrono::microseconds) { sleep(local, counter, step); });
  }
  acquireCounters();
}

void NodeArea::check(int local, Counter counter, uint64_t step, bool checkProcess,
                     std::chrono::steady_clock::time_point since, const std::string& what) const {
  comm_.engine().throwIfCancelled(what);
  const int rank = localToRank_[static_cast<size_t>(local)];
  const auto gone = [&](const std::string& why) {
    // It may have reached the step just before going: only then is it fine.
    if (reached(local, counter, step)) return;
    throw Error(loomRemoteError, what + ": rank " + std::to_string(rank) + " " + why + " before step " +
                                     std::to_string(step) + " of the shared-memory collectives");
  };
  if (control_->rank(local).left.value.load(std::memory_order_acquire) != 0) gone("left (its communicator was destroyed)");
  if (control_->rank(local).failed.value.load(std::memory_order_acquire) != 0) gone("failed out of a collective");
  if (checkProcess) {
    const int pid = comm_.peers()[static_cast<size_t>(rank)].pid;
    if (processHasExited(pid)) gone("(pid " + std::to_string(pid) + ") exited");
  }
  if (checkProcess && probe_) probe_->check(rank, std::chrono::steady_clock::now() - since, what);
  const auto timeout = comm_.engine().context().timeout;
  if (std::chrono::steady_clock::now() - since > timeout) {
    throw Error(loomTimeout, what + ": rank " + std::to_string(rank) + " did not reach step " + std::to_string(step) +
                                 " of the shared-memory collectives for " + std::to_string(timeout.count()) +
                                 " ms (LOOM_TIMEOUT_MS)");
  }
}

}  // namespace loom::coll::shm
