// The shared segment in which the ranks of one node run the shared-memory
// collectives (algorithms/shm_*.cpp) without going through point-to-point.
//
//   control  — per local rank, one cache line per counter, written only by
//              that rank (release) and read by the others (acquire):
//                arrived: kArrivalDepth lines (step s in line s % depth),
//                         the last step whose input this rank has staged,
//                         with the call that step announces and up to
//                         kArrivalBytes of staged input
//                reduced: the last step whose slice of the result it has written
//                left:    set when the rank's communicator goes away
//                reading: set while the rank reads peers' buffers in place
//                failed:  set when the rank failed out of a call whose
//                         buffers its peers may read (abandonCall)
//              plus the sleepers' futex word (see wait()).
//   data     — buffersFor(ranks, slotBytes) buffers, each a staging slot
//              per local rank and one result slot, `slotBytes` each.
//
// Every collective on the node advances all ranks through the same numbered
// steps (one slot-sized piece each); step s uses buffer s % buffers. A rank
// stages step s only after it has seen every rank arrive at step s - 1, and
// each rank is done reading step s - 2's buffer before it arrives at step
// s - 1, so two buffers let a fast rank run one step ahead with no extra
// handshake. More than two are for the caches (buffersFor).
//
// A rank that reads nothing at a step, or one peer's staging only, need not
// wait for every rank there: it departs (depart, arriveFrom), and waits for
// them before it stages in a slot (nextStep) or, if it stages at most
// kArrivalBytes (in its arrival line) or nothing, only when the line it is
// about to reuse requires it, kArrivalDepth steps on (nextLineStep); then it
// settles half the lines at once, looking at each peer's newest, since a look
// at a line its owner writes next costs that store a trip between cores. So a
// small broadcast's root streams calls through its arrival lines, as Open
// MPI's root does through its FIFO, and each receiver waits for the root alone.
//
// Waits spin, then yield, then sleep on a futex (ranks may outnumber cores),
// and give up with a named error on LOOM_TIMEOUT_MS without progress, on
// loomCommAbort, or when a rank they wait for has left or died.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/asymmetric_fence.hpp"
#include "base/cache_line.hpp"
#include "base/shm/segment.hpp"
#include "collectives/stall_probe.hpp"
#include "comm/communicator.hpp"
#include "memory/registration.hpp"

namespace loom::coll::shm {


// Bytes of a step that travel in the staging rank's arrival line instead of
// its slot (NodeArea::stage with a size): two cache lines, of which the first
// carries the counter, the call and the first 32 bytes.
inline constexpr size_t kArrivalBytes = 96;
// Arrival lines per rank: how many steps a departing rank may be ahead of its
// slowest peer (NodeArea::depart). Where ranks outnumber cores, two ranks on
// one core take turns at these waits, each turn a yield and a context switch
// (about 2 µs on the 2-vCPU VMs), so the depth sets how often they turn: 64
// took a 4-rank 64-byte broadcast from 3.2 to 1.4 µs against 8 (Open MPI's
// root, which waits only when a peer's fast box is full, 1.0-1.3 µs).
inline constexpr uint64_t kArrivalDepth = 64;

// The data area's buffers for `ranks` local ranks and slots of `slotBytes`:
// as many as make the area span kDataAreaBytes, from 2 (the protocol's least)
// to kMostBuffers, down to a power of two (a step's buffer is then a mask of
// its number, not a division, on every step's path). A rank that rewrites a
// slot whose lines its readers still hold in their caches pays for taking
// each line back from them, one cross-core round trip a line; the more bytes
// pass through those caches before a slot comes round again, the fewer such
// lines are left. With two ranks, 256 KiB slots and 2 MiB of L2 a core, two
// buffers (1.5 MiB) left most lines behind: four took a 4 MiB broadcast from
// 519 to 249 µs and a reduce-scatter from 311 to 167, eight a 256 KiB
// all-reduce from 38 to 17 (bench/RESULTS.md, "slots that come round less
// often"). The same on every rank: it depends on the node's rank count and
// the slot alone.
inline constexpr size_t kDataAreaBytes = size_t{6} << 20;
inline constexpr size_t kMostBuffers = 8;
size_t buffersFor(int ranks, size_t slotBytes);

enum class Counter { Arrived, Reduced };

// What a rank is running, as its peers must be running it too.
struct CallInfo {
  uint64_t sequence = 0;
  uint64_t bytes = 0;
  uint32_t call = 0;  // the call signature: collective, datatype, op, root modulo 2^20 (call_signature.hpp)
  int32_t root = 0;   // all of it

  bool operator==(const CallInfo&) const = default;
};

// Where a rank's buffers for a call are, for its peers to read them in
// place, published with the call. Plain data. Each side is absent (pid 0:
// nothing there for peers to read) or a memory::Handle: loomMemAlloc'd (fd >=
// 0, with its memfd), device memory (with its CUDA IPC handle where CUDA
// exports one), or an address in process pid.
struct CallBuffers {
  // 1: this rank offered its buffers for the call; 2: it published them but
  // declines to be read in place (LOOM_SHM_SINGLE_COPY=0); 0: nothing.
  uint32_t offered = 0;
  int32_t pid = 0;  // the offering rank's process
  memory::Handle send;
  memory::Handle recv;
};

// Every local rank's buffers of the current call, readable from this process.
struct PeerBuffers {
  std::vector<const std::byte*> send;
  std::vector<const std::byte*> recv;
  // All of them on one GPU: for device kernels to read, not the CPU. Set
  // for the call once every rank's offer says so, before the mapping step.
  bool device = false;
};

class NodeArea;

// A stretch in which this rank reads its peers' buffers in place (their
// PeerBuffers). A peer that fails out of the call waits for it to end before
// it returns and its owner may free them (NodeArea::abandonCall). Throws
// loomRemoteError, having read nothing, if a local rank has already failed out.
class PeerReads {
 public:
  PeerReads(NodeArea& node, const std::string& what);
  ~PeerReads();
  PeerReads(const PeerReads&) = delete;
  PeerReads& operator=(const PeerReads&) = delete;

 private:
  NodeArea& node_;
};

// A stretch in which this rank's device reads its peers' device buffers
// (PeerBuffers::device): when it ends, its CUDA IPC views of them close
// (unless LOOM_CUDA_IPC_CACHE keeps them; memory::Mappings).
class DeviceReads {
 public:
  explicit DeviceReads(NodeArea& node) : node_(node) {}
  ~DeviceReads();
  DeviceReads(const DeviceReads&) = delete;
  DeviceReads& operator=(const DeviceReads&) = delete;

 private:
  NodeArea& node_;
};

class NodeArea {
 public:
  // Collective over the whole communicator (every rank calls it; it uses the
  // bootstrap): the lowest rank of each node creates its node's segment and
  // the others map it.
  NodeArea(Communicator& comm, size_t slotBytes);
  ~NodeArea();  // marks this rank as gone, so that waiters fail at once
  NodeArea(const NodeArea&) = delete;
  NodeArea& operator=(const NodeArea&) = delete;

  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }
  size_t slotBytes() const { return slotBytes_; }
  // The data area's buffers (buffersFor).
  size_t buffers() const { return buffers_; }

  // Starts a collective: every rank runs at least one step for it, and the
  // first carries `call`, so that ranks which called different collectives or
  // counts fail at that step with a named error instead of falling out of step.
  // `callBytes` is the user's count x datatype size (call.bytes may be a part
  // of it), for the stall probe.
  void startCall(const CallInfo& call, uint64_t callBytes);
  // Offers this rank's buffers of the call just started for its peers to read
  // in place (unless LOOM_SHM_SINGLE_COPY=0, when it only publishes them).
  // Call before the call's first step. A side of 0 bytes is one the peers do
  // not read (a broadcast's receivers offer nothing).
  void offerBuffers(const void* send, size_t sendBytes, const void* recv, size_t recvBytes);
  // After the call's first arrive(): every local rank's buffers (null where
  // absent), if every rank offered them and either all are host memory that
  // is loomMemAlloc'd or in this process, or all are device memory on one GPU
  // that CUDA IPC exports or that is in this process (PeerBuffers::device);
  // null otherwise. The same answer on every rank.
  const PeerBuffers* peerBuffers() const { return peersInPlace_ ? &peerBuffers_ : nullptr; }
  // After the call's first arrive(), where every rank's buffers are device
  // memory to be read in place: one more step, at which the ranks learn
  // whether every one of them could map its peers' buffers (CUDA IPC may
  // refuse); if one could not, none reads in place (peerBuffers() turns
  // null). Returns whether they are read in place; every rank calls it, and
  // every rank gets the same answer.
  bool agreeOnDeviceMappings(const std::string& what);
  // After the call's first arrive(): whether some rank offered device memory.
  // Such a rank staged nothing at that step; unless the buffers are read in
  // place, every rank starts its staging over. The same answer on every rank.
  bool deviceOffered() const { return deviceOffered_; }
  // Closes this rank's CUDA IPC views of its peers' buffers once it has read
  // them for the call (their owners may free them after it), unless
  // LOOM_CUDA_IPC_CACHE keeps them for later calls.
  void closeDeviceMappings() noexcept { mappings_.closeDeviceMappings(); }
  // This rank fails out of the current call. If it offered its buffers, its
  // peers may be reading them: it marks itself failed, so that they read no
  // more of them and their waits for it fail, and returns once none is inside
  // a PeerReads (or LOOM_TIMEOUT_MS has passed). The node's collectives fail
  // from then on, as after any failure of the communicator.
  void abandonCall() noexcept;
  // Numbers the next step; every rank draws the same sequence. Returns once
  // every rank has arrived at every earlier step (after a depart()), so this
  // rank may stage in its slot.
  uint64_t nextStep();
  // Numbers the next step for a rank that stages at most kArrivalBytes there,
  // in its arrival line (stage with a size), or nothing: returns once every
  // rank has read what that line held kArrivalDepth steps ago (where it has
  // to wait for that, once every rank reached the step half the depth ago).
  uint64_t nextLineStep();
  // This rank has staged `step`: publishes it and waits until every local
  // rank has. `what` names the collective in errors ("allreduce #12").
  void arrive(uint64_t step, const std::string& what) {
    publish(step);
    awaitArrivals(step, what);
  }
  // arrive() in two halves, for a rank with work of its own to do between
  // (an all-gather's copy of its own block): publishes `step`, then waits.
  void publish(uint64_t step) { post(Counter::Arrived, step); }
  void awaitArrivals(uint64_t step, const std::string& what);
  // arrive() for a rank that reads nothing of its peers' at `step` (a
  // broadcast's or scatter's root, a gather's or whole reduce's others):
  // publishes the step and returns at once, having checked the calls of the
  // peers already there (the others check its own, node_area.cpp says how).
  // The wait for the peers comes at a later nextStep() or nextLineStep(); a
  // mismatch a peer finds reaches this rank by its notice (the watchdog's).
  // Not for a first step that offers buffers (arrive resolves them).
  void depart(uint64_t step, const std::string& what);
  // arrive() for a rank that reads only `local`'s staging at `step` (a
  // broadcast's receiver): publishes the step and waits for `local` alone,
  // checking its call at a call's first step (a rank that called otherwise
  // than `local` is found so, by it or by `local`); the wait for the others
  // comes later, as after depart().
  void arriveFrom(int local, uint64_t step, const std::string& what);
  // A step with nothing staged: returns once every local rank has got here.
  void sync(const std::string& what) { arrive(nextStep(), what); }

  // Room for one source pointer per local rank, for the reductions' use.
  std::span<const void*> sources() { return sources_; }

  std::byte* stage(int local, uint64_t step) const;  // local rank's staging slot for `step`
  // Where `local` stages `bytes` for `step` when that is all it stages for the
  // step: up to kArrivalBytes in its arrival line, which the peers fetch anyway
  // to see it arrive (one cache line between cores for a small step), else its slot.
  std::byte* stage(int local, uint64_t step, size_t bytes) const;
  std::byte* result(uint64_t step) const;            // the result slot for `step`

  // Publishes that this rank has reached `step` on `counter`.
  void post(Counter counter, uint64_t step);

  // Returns once every local rank has posted `step` on `counter`.
  void waitAll(Counter counter, uint64_t step, const std::string& what);
  // The same for one local rank.
  void waitFor(int local, Counter counter, uint64_t step, const std::string& what);

 private:
  friend class PeerReads;
  // Places this rank's staging slots (and the creator's result slots) on its NUMA node.
  void firstTouch(size_t controlBytes);
  // Waits for every rank at the departed steps up to `step` (one look at
  // the newest where they are there).
  void settle(uint64_t step);
  struct Deferred;
  // settle's wait, once a first look found a rank short of `d`'s step.
  [[gnu::noinline]] void waitForDeferred(const Deferred& d);
  // Publishes `step` and leaves its wait to settle().
  void postAndDefer(uint64_t step);
  // Whether every local rank has posted `step` on `counter` (acquiring what they wrote before it if so).
  bool allReached(Counter counter, uint64_t step) const;
  // Throws loomInvalidUsage naming the first rank (`only`, or any when -1)
  // whose call announced at `step` differs from this rank's.
  void checkCalls(uint64_t step, const std::string& what, int only = -1) const;
  [[noreturn, gnu::cold, gnu::noinline]] void throwMismatch(int local, const CallInfo& theirs,
                                                            const std::string& what) const;
  // Maps the buffers every local rank offered for the call at `step`, if all did.
  void resolveBuffers(uint64_t step);
  bool reached(int local, Counter counter, uint64_t step) const;
  // waitFor's loop, once a first look found `local` short of `step`.
  [[gnu::noinline]] void waitUntilReached(int local, Counter counter, uint64_t step, const std::string& what);
  // Throws if `local` cannot reach `step` any more (it left, or its process
  // died: looked up only when `checkProcess`), on abort, or past the timeout.
  void check(int local, Counter counter, uint64_t step, bool checkProcess,
             std::chrono::steady_clock::time_point since, const std::string& what) const;
  void sleep(int local, Counter counter, uint64_t step);  // one futex wait, bounded by kSleepSlice
  void wake();                                            // wakes the sleepers, if any

  Communicator& comm_;
  int localRank_ = 0;
  int localSize_ = 1;
  size_t slotBytes_;
  size_t buffers_ = 2;  // buffersFor
  uint64_t step_ = 0;
  // Steps this rank posted without waiting for every rank (depart,
  // arriveFrom), oldest first, in a ring: at most kArrivalDepth - 1 at once.
  // A step's call is named (describeCall) only where a wait for it fails.
  struct Deferred {
    uint64_t step = 0;
    uint32_t call = 0;      // the call signature of the step's call
    uint32_t sequence = 0;  // and its number
  };
  std::array<Deferred, kArrivalDepth> deferred_;
  uint64_t deferredFirst_ = 0;  // index (mod depth) of the oldest
  uint64_t deferredCount_ = 0;
  bool spin_ = true;  // false when the node's ranks outnumber this process's CPUs
  // Between a post's store and its look for sleepers (light) and a sleeper's
  // announcement and its last look at the counter (heavy): split where every
  // local rank's process registered for it (asymmetric_fence.hpp).
  AsymmetricFence postFence_{false};
  std::chrono::milliseconds timeout_{0};  // LOOM_TIMEOUT_MS; read here, where a failed communicator no longer answers
  bool singleCopy_ = true;  // LOOM_SHM_SINGLE_COPY
  CallInfo call_;
  mutable std::optional<StallProbe> probe_;  // of call_: asks a peer that stalls it where it is
  uint64_t callStep_ = 0;  // the step that announces call_; 0: not announced yet
  CallBuffers offered_;
  bool peersInPlace_ = false;
  bool deviceOffered_ = false;
  bool announcedShared_ = false;  // logged once per communicator
  bool announcedUnreachable_ = false;
  PeerBuffers peerBuffers_;
  memory::Mappings mappings_;
  std::vector<int> localToRank_;  // communicator rank of each local rank
  std::vector<const void*> sources_;
  loom::shm::Segment segment_;
  struct Control;
  Control* control_ = nullptr;
  std::byte* data_ = nullptr;
};

}  // namespace loom::coll::shm
