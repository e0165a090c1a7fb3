// What collectives that run on a CUDA stream with no host in the loop need
// of a communicator (collectives/resident_collectives.hpp): one device
// allocation per rank, made at init and mapped by every other rank once
// (CUDA IPC between processes, the pointer itself between threads), holding
// the rank's flags and a scratch its peers read. Ranks synchronize through
// the flags with stream memory operations: a rank's stream writes its own
// flags and waits on its peers', so a waiting stream holds no SM and no host
// thread takes part in a call.
//
// Ranks publish where each piece's part lies (published_piece.hpp): their
// scratch, or their own buffer where every peer's kernels may read it in
// place (threads of one process: its address; processes: an allocation
// every peer has opened through CUDA IPC, resident_regions.hpp).
//
// Made where every rank of the communicator is on one node and sees a
// device; ready only where every rank's device reaches every rank's
// allocation (its own GPU, or one it may access as a peer) and every rank
// could map every other's, which the ranks agree on at init. When the
// communicator fails (an abort, a revoke, a poison) release() raises every
// word of the rank's own line past any sequence, so none of its streams
// waits forever on a rank that will never write.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/device/ipc.hpp"
#include "base/device/published_piece.hpp"
#include "comm/device_card.hpp"
#include "comm/entry_gate.hpp"
#include "comm/resident_regions.hpp"

namespace loom {

class Bootstrap;

class ResidentArea {
 public:
  // Per rank: the flags' line (with the rank's tables of its peers'
  // regions), then the collectives' scratch, then the point-to-point slots
  // (two per receiver).
  static constexpr size_t kFlagBytes = 10752;
  static constexpr size_t kP2pSlotBytes = size_t{512} << 10;
  // The most ranks one reduction pass folds (collectives/cuda/kernels.hpp).
  static constexpr int kMaxRanks = 16;

  // Collective over the communicator's ranks (a bootstrap all-gather, twice);
  // `scratchBytes` of scratch per rank; `twoShotFromBytes` as this rank would
  // have it, `twoShotChosen` whether set (LOOM_DEVICE_TWO_SHOT_BYTES) or the
  // default (rank 0's are every rank's). Never throws for a device that
  // cannot take part: ready() is then false on every rank.
  ResidentArea(Bootstrap& bootstrap, size_t scratchBytes, uint64_t twoShotFromBytes, bool twoShotChosen);
  ~ResidentArea();
  ResidentArea(const ResidentArea&) = delete;
  ResidentArea& operator=(const ResidentArea&) = delete;

  // Whether every rank can run resident collectives (the same on every rank).
  bool ready() const { return ready_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }
  size_t scratchBytes() const { return scratchBytes_; }
  // All-reduces of 3 or more ranks whose call holds at least this many bytes
  // run in two shots (0: never); the same on every rank. Unless chosen, 0
  // for processes sharing one GPU: each round of flags costs them a context
  // switch, and two shots take a round more a piece, where one shot's extra
  // reads run at the GPU's own memory rate.
  uint64_t twoShotFromBytes() const { return twoShotFromBytes_; }
  // Where every rank's kernels may read this rank's device buffer `p` in
  // place, as a published place names it; nullopt where they may not (yet),
  // and it goes through the scratch. Threads of one process: the address
  // itself (region 0), where `p` is on this rank's device (whose memory
  // every rank's device reaches, as its area shows) and, where the ranks
  // span several devices, not from a memory pool, which grants no access to
  // other GPUs unasked. Processes: besides, an allocation every peer has
  // opened (ResidentRegions::placeOf; never with LOOM_CUDA_IPC_CACHE=0).
  std::optional<RegionPlace> placeForPeers(const void* p);
  // Whether every rank's kernels may read every rank's buffers on their
  // device where they lie, agreed by all without asking: ranks that are
  // threads of one process on one GPU (placeForPeers answers for any buffer
  // on it) whose device has stream-ordered memory pools (for a call's own
  // copies, DeviceRuntime::allocOnStream). The same on every rank.
  bool sharesEveryBuffer() const { return sharesEveryBuffer_; }
  // Memory a call allocated on its stream (DeviceRuntime::allocOnStream)
  // as a published place names it, where sharesEveryBuffer() holds: on this
  // rank's GPU, every peer reads it. Throws loomInvalidUsage, naming the
  // rank, where the stream is on another GPU than the communicator's.
  RegionPlace placeOfStreamMemory(const void* p);
  // Memory of this rank's own area (a slot) as a published place names it.
  RegionPlace areaPlace(const std::byte* p) const;
  // Opens the buffers the peers offered since this rank last looked, so
  // that they may read them in place from a later call on (the reader's
  // part of ResidentRegions); every call calls it first. Nothing to do
  // between threads.
  void openPeersRegions();
  // A place rank `owner` published, as this rank's kernels reach it: with
  // this rank's table of the owner's regions.
  PlaceView view(const PublishedPiece* place, int owner) const;
  // This rank's table of rank `owner`'s regions, in its own device memory.
  uint64_t* regionBases(int owner) const;

  // The words of rank `owner`'s flag line, as this rank's device reaches
  // them: `arrivedFrom(owner, writer)` holds the sequence of the last call
  // whose input `writer` has put in its scratch, `doneBy(owner, reader)` the
  // last call in which `reader` finished reading the owner's scratch. Each
  // word is written by its writer or reader and waited on by the owner only,
  // so that a rank waits on its own memory alone, and its failure releases
  // its own streams by writing its own line.
  uint64_t* arrivedFrom(int owner, int writer) const;
  uint64_t* doneBy(int owner, int reader) const;
  // `reducedFrom(owner, writer)`: the last call whose reduced share `writer`
  // has put in its scratch (a two-shot all-reduce's second step); a rank
  // writes its own word in its own line too, for overdue().
  uint64_t* reducedFrom(int owner, int writer) const;
  // The last call this rank's stream has finished (its own line).
  uint64_t* finished() const;
  // Where rank `owner` put its part of call `sequence`'s piece, in its own
  // line: two entries that the calls alternate, as the scratch slots do, so
  // that a rank publishes the next call while its readers still read this
  // one.
  PublishedPiece* published(int owner, uint64_t sequence) const;

  // Point-to-point (comm/engine/resident_p2p.hpp): a message goes as pieces
  // of at most kP2pSlotBytes through the sender's two slots for its
  // receiver, numbered per ordered pair from 1. `sentTo(owner, sender)`: the
  // last piece `sender` has put in its slot for `owner`; `takenBy(owner,
  // receiver)`: the last piece `receiver` has copied out of `owner`'s slot for
  // it. `sent(to)` and `received(from)` (this rank's own line): the last
  // piece this rank's stream has published to `to` or copied from `from`.
  uint64_t* sentTo(int owner, int sender) const;
  uint64_t* takenBy(int owner, int receiver) const;
  uint64_t* sent(int to) const;
  uint64_t* received(int from) const;
  // Rank `owner`'s slot for `receiver` that piece `piece` uses.
  std::byte* p2pSlot(int owner, int receiver, uint64_t piece) const;
  // Where rank `owner` put piece `piece` for `receiver`, in its own line:
  // its slot, or its buffer to be read in place. Two entries per receiver,
  // alternating as the slots do.
  PublishedPiece* p2pPublished(int owner, int receiver, uint64_t piece) const;
  // A piece to or from `peer` is queued: its number (1, 2, ... per ordered
  // pair and direction), noted with the time for overdue(); `takenAtEnd`: a
  // send read in place, which waits until the receiver has taken this piece
  // (not only the one two before).
  uint64_t beginSendPiece(int to, bool takenAtEnd = false);
  uint64_t beginReceivePiece(int from);
  // The stream of this rank's channel to (`send`) or from `peer`, made on
  // first use on the current device and destroyed with the area: a group's
  // channels run side by side, as NCCL's per-peer channels do.
  void* channelStream(int peer, bool send);
  // Rank r's scratch, as this rank's device reaches it: two slots of
  // slotBytes(), call `sequence` using slot sequence % 2, so that a rank
  // fills the next call's slot while its peers still read this one's.
  std::byte* slot(int r, uint64_t sequence) const;
  size_t slotBytes() const { return scratchBytes_ / 2; }
  // LOOM_DEVICE_ONE_KERNEL_BYTES, as this rank read it at init.
  size_t oneKernelBytes() const { return oneKernelBytes_; }

  // Claims `stream` for this rank's next resident call, before it is
  // queued. Refused (loomInvalidUsage, naming both ranks) where another rank
  // of this communicator, a thread of this process, queued its part of the
  // same call on that stream: its part waits for this rank's, which would
  // wait behind it on the stream, and neither would ever run (one thread
  // driving several ranks through one stream). Each rank needs a stream of
  // its own.
  void claimStream(void* stream);
  // A message of a group, as claimPointToPoint sees it (and the
  // communicator's entry gate, comm/entry_gate.hpp): to (`send`) or from
  // `peer`, in `pieces` pieces; `takenAtEnd`: a send read in place, which
  // waits at its end for its receiver to have taken its last piece.
  using MessageClaim = EntryGate::Message;
  // Claims `stream` for this rank's next resident messages (one group's, in
  // call order), before any is queued, as claimStream does for calls.
  // Refused (loomInvalidUsage, naming both ranks) where one of them gives a
  // piece that a message queued earlier on that stream, by a rank of this
  // communicator that is a thread of this process, still waits for: a
  // receive waits for its sender, a send of more than two pieces for its
  // receiver to take the pieces two before (a send of one or two, once the
  // pair's earlier pieces are taken, completes alone, so its receive may
  // follow it on one stream). What it waits for would wait behind it on the
  // stream, and neither would ever run.
  void claimPointToPoint(std::span<const MessageClaim> messages, void* stream);

  // A resident call of this rank begins: its sequence (every rank numbers the
  // same calls alike), noted with the time, for overdue(); `readersAtEnd`:
  // the call reads its peers' inputs in place and waits at its end for them
  // to have read its own.
  uint64_t beginCall(bool readersAtEnd = false);
  // Where the oldest call this rank's stream has not finished was queued
  // more than `timeout` ago: what to say of it, naming the ranks it still
  // waits for. Reads the device's words only while a call is unfinished.
  std::optional<std::string> overdue(std::chrono::milliseconds timeout);

  // Raises every word of this rank's line past any sequence (the
  // communicator failed), so that none of its streams waits any more; the
  // allocation is then never freed, as a peer's stream may still write into
  // it. Idempotent, thread-safe; never throws.
  void release() noexcept;

 private:
  cuda::DeviceRuntime& runtime_;
  int rank_ = 0;
  size_t scratchBytes_ = 0;
  uint64_t twoShotFromBytes_ = 0;
  size_t oneKernelBytes_ = 0;
  bool sharesAddresses_ = false;  // every rank a thread of this process: a pointer is the same to all
  bool oneDevice_ = true;  // every rank's area on one device
  bool sharesEveryBuffer_ = false;
  int device_ = -1;
  std::byte* own_ = nullptr;  // this rank's allocation
  std::vector<PeerView> peers_;
  std::unique_ptr<ResidentRegions> regions_;  // processes only, where every peer's buffers may be opened
  bool ready_ = false;
  std::atomic<uint64_t> sequence_{0};
  std::mutex callsMutex_;
  struct Unfinished {
    uint64_t sequence = 0;
    std::chrono::steady_clock::time_point queued;
    bool readersAtEnd = false;  // the call waits at its end for its peers to have read its input
  };
  std::deque<Unfinished> unfinished_;
  // Point-to-point pieces queued, per peer, and the unfinished ones with
  // when they were queued (under callsMutex_).
  struct PendingPiece {
    bool send = false;
    bool takenAtEnd = false;
    int peer = 0;
    uint64_t piece = 0;
    std::chrono::steady_clock::time_point queued;
  };
  std::vector<uint64_t> sendPieces_, receivePieces_;
  std::deque<PendingPiece> pendingPieces_;
  std::vector<void*> channelStreams_;  // 2 per peer, made on first use (under callsMutex_)
  std::optional<std::string> overduePiece(std::chrono::milliseconds timeout);  // under callsMutex_
  std::mutex releaseMutex_;
  bool released_ = false;
  struct StreamClaims;  // the process's ranks' last call on each stream (resident_area.cpp)
  // Threads of one process only: shared by the communicator's ranks here,
  // found by rank 0's area's address (the same to every thread).
  std::shared_ptr<StreamClaims> claims_;
};

}  // namespace loom
