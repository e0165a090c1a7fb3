#include "comm/resident_area.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/device/ipc.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/shared_by_key.hpp"
#include "comm/bootstrap/bootstrap.hpp"

namespace loom {
namespace {

// What a rank tells the others of its area.
struct Card {
  DeviceCard area;
  uint64_t twoShotFromBytes = 0;  // rank 0's is every rank's
  uint8_t twoShotChosen = 0;      // and so is whether it was set or the default
  uint64_t scratchBytes = 0;      // every rank's must be the same: peers find slots by it
  char regions[64] = {};          // rank 0's: the name of the regions' segment (resident_regions.hpp), or empty
};

// The words of a rank's flag line, one per peer each.
constexpr size_t kArrivedAt = 0;
constexpr size_t kDoneByAt = ResidentArea::kMaxRanks * sizeof(uint64_t);
constexpr size_t kReducedAt = 2 * kDoneByAt;
constexpr size_t kFinishedAt = 3 * kDoneByAt;
constexpr size_t kSentToAt = 4 * kDoneByAt;
constexpr size_t kTakenByAt = 5 * kDoneByAt;
constexpr size_t kSentAt = 6 * kDoneByAt;
constexpr size_t kReceivedAt = 7 * kDoneByAt;
// Two entries, the calls alternating between them.
constexpr size_t kPublishedAt = 8 * kDoneByAt;
constexpr size_t kPublishedBytes = 2 * sizeof(PublishedPiece);
// Two per receiver, the pieces to it alternating between them.
constexpr size_t kP2pPublishedAt = kPublishedAt + kPublishedBytes;
constexpr size_t kP2pPublishedBytes = 2 * ResidentArea::kMaxRanks * sizeof(PublishedPiece);
// This rank's tables of its peers' regions (PlaceView::bases): read by its
// own kernels only, written by its host.
constexpr size_t kRegionBasesAt = 2560;
constexpr size_t kRegionTableBytes = kPlaceRegions * sizeof(uint64_t);
static_assert(kFinishedAt + sizeof(uint64_t) <= kSentToAt);
static_assert(kReceivedAt + kDoneByAt <= kPublishedAt);
static_assert(kP2pPublishedAt + kP2pPublishedBytes <= kRegionBasesAt);
static_assert(kRegionBasesAt + ResidentArea::kMaxRanks * kRegionTableBytes <= ResidentArea::kFlagBytes);
static_assert(ResidentArea::kFlagBytes % 256 == 0, "the scratch after the line stays aligned for the kernels");

}  // namespace

// What the ranks of one communicator that are threads of this process
// queued last on each stream: the rank and its call's first sequence.
struct ResidentArea::StreamClaims {
  std::mutex mutex;
  std::map<void*, std::pair<int, uint64_t>> last;
  // Point-to-point, per word a message waits on: a pair's "sent" (its
  // receiver waits) or "taken" (its sender waits). The last piece queued to
  // give it, and the messages queued that still wait for a later one: up to
  // which piece, on which stream, by which rank.
  struct Wait {
    uint64_t upTo = 0;
    void* stream = nullptr;
    int rank = -1;
  };
  struct Word {
    uint64_t given = 0;
    std::vector<Wait> waits;
  };
  std::map<std::tuple<int, int, bool>, Word> words;  // (sender, receiver, taken)
};

ResidentArea::ResidentArea(Bootstrap& bootstrap, size_t scratchBytes, uint64_t twoShotFromBytes,
                           bool twoShotChosen)
    : runtime_(cuda::runtime()),
      rank_(bootstrap.rank()),
      scratchBytes_(scratchBytes),
      oneKernelBytes_(static_cast<size_t>(env::getInt("LOOM_DEVICE_ONE_KERNEL_BYTES", 0, 1 << 30))) {
  const int n = bootstrap.size();
  peers_.resize(static_cast<size_t>(n));
  sendPieces_.assign(static_cast<size_t>(n), 0);
  receivePieces_.assign(static_cast<size_t>(n), 0);
  channelStreams_.assign(2 * static_cast<size_t>(n), nullptr);
  Card mine;
  mine.twoShotFromBytes = twoShotFromBytes;
  mine.twoShotChosen = twoShotChosen ? 1 : 0;
  mine.scratchBytes = scratchBytes;
  const size_t bytes = kFlagBytes + scratchBytes + 2 * kP2pSlotBytes * static_cast<size_t>(n);
  bool ok = n <= kMaxRanks;
  // Processes read each other's buffers in place only through allocations
  // they keep open (LOOM_CUDA_IPC_CACHE): rank 0 makes the segment they
  // exchange them through, in case the ranks turn out to be processes.
  const bool keepsOpened = env::getInt("LOOM_CUDA_IPC_CACHE", 0, 1) == 1;
  shm::Segment segment;
  if (ok && rank_ == 0 && n > 1) {
    try {
      segment = shm::Segment::create(ResidentRegions::bytesFor(n), shm::Segment::Populate::ByFirstWriter);
      std::snprintf(mine.regions, sizeof mine.regions, "%s", segment.name().c_str());
    } catch (const Error& e) {
      LOOM_INFO(Init, "processes' buffers go through the resident scratch: no segment to exchange them: %s", e.what());
    }
  }
  if (ok) {
    try {
      own_ = static_cast<std::byte*>(runtime_.allocDevice(bytes));
      device_ = runtime_.deviceOf(own_);
      const std::vector<std::byte> zeros(kFlagBytes);
      runtime_.copyNow(own_, zeros.data(), kFlagBytes);
      mine.area = cardOf(own_, bytes);
    } catch (const Error& e) {
      LOOM_INFO(Init, "no resident collectives: this rank's device area: %s", e.what());
      ok = false;
    }
  }
  std::vector<std::byte> cards(static_cast<size_t>(n) * sizeof(Card));
  std::memcpy(cards.data() + static_cast<size_t>(rank_) * sizeof(Card), &mine, sizeof mine);
  bootstrap.allgather(cards, sizeof(Card));
  Card first;
  std::memcpy(&first, cards.data(), sizeof first);
  twoShotFromBytes_ = first.twoShotFromBytes;
  sharesAddresses_ = true;
  for (int r = 0; r < n && ok; ++r) {
    Card card;
    std::memcpy(&card, cards.data() + static_cast<size_t>(r) * sizeof(Card), sizeof card);
    sharesAddresses_ = sharesAddresses_ && card.area.pid == mine.area.pid;
    oneDevice_ = oneDevice_ && card.area.device == mine.area.device;
    if (card.scratchBytes != scratchBytes) {
      LOOM_INFO(Init, "no resident collectives: rank %d has %llu bytes of scratch (LOOM_DEVICE_SCRATCH_BYTES), this rank %zu",
                r, static_cast<unsigned long long>(card.scratchBytes), scratchBytes);
      ok = false;
      break;
    }
    try {
      peers_[static_cast<size_t>(r)] = mapCard(card.area);
      ok = peers_[static_cast<size_t>(r)].base != nullptr;
    } catch (const Error& e) {
      LOOM_INFO(Init, "no resident collectives: rank %d's device area cannot be mapped here: %s", r, e.what());
      ok = false;
    }
  }
  if (ok && !sharesAddresses_ && keepsOpened && first.regions[0] != '\0') {
    try {
      const std::string name(first.regions, strnlen(first.regions, sizeof first.regions));
      regions_ = std::make_unique<ResidentRegions>(
          rank_ == 0 ? std::move(segment) : shm::Segment::open(name, ResidentRegions::bytesFor(n)), rank_, n,
          [this](int owner, uint32_t region, uint64_t base) { runtime_.storeValue(regionBases(owner) + region, base); });
    } catch (const Error& e) {
      LOOM_INFO(Init, "this rank's buffers go through the resident scratch: the regions' segment: %s", e.what());
    }
  }
  if (ok) {
    // Rank r's region 1 is its area, as this rank maps it (0 stays 0).
    std::vector<uint64_t> bases(static_cast<size_t>(kMaxRanks) * kPlaceRegions, 0);
    for (int r = 0; r < n; ++r) {
      bases[static_cast<size_t>(r) * kPlaceRegions + 1] = reinterpret_cast<uintptr_t>(peers_[static_cast<size_t>(r)].base);
    }
    runtime_.copyNow(own_ + kRegionBasesAt, bases.data(), bases.size() * sizeof(uint64_t));
  }
  std::vector<std::byte> verdicts(static_cast<size_t>(n));
  verdicts[static_cast<size_t>(rank_)] = std::byte{ok ? uint8_t{1} : uint8_t{0}};
  bootstrap.allgather(verdicts, 1);
  ready_ = true;
  for (std::byte v : verdicts) ready_ = ready_ && v == std::byte{1};
  if (!ready_) {
    regions_.reset();
    for (PeerView& peer : peers_) peer = PeerView{};
  }
  if (regions_ != nullptr) regions_->unlink();  // every rank has opened it by now
  // Every rank saw the same cards, so every rank agrees; pids of one node's
  // processes differ.
  sharesAddresses_ = sharesAddresses_ && ready_;
  const bool processesOnOneGpu = ready_ && oneDevice_ && !sharesAddresses_;
  if (processesOnOneGpu && first.twoShotChosen == 0) twoShotFromBytes_ = 0;
  // One device, so the same answer on every rank.
  sharesEveryBuffer_ = sharesAddresses_ && oneDevice_ && runtime_.hasMemoryPools(device_);
  if (sharesAddresses_) claims_ = sharedByKey<StreamClaims>(static_cast<const void*>(peers_[0].base));
  LOOM_INFO(Init, "resident collectives %s (%zu bytes of scratch a rank%s)", ready_ ? "ready" : "off", scratchBytes,
            sharesAddresses_ ? ", ranks of one process: buffers read in place" : "");
}

ResidentArea::~ResidentArea() {
  const auto destroyChannels = [&] {
    // A destroyed stream's queued work still runs (the fake's destroy waits
    // for it): only once nothing on them can wait forever.
    for (void* stream : channelStreams_) {
      if (stream != nullptr) runtime_.destroyStream(stream);
    }
  };
  const auto isReleased = [&] {
    std::lock_guard lock(releaseMutex_);
    return released_;
  };
  if (isReleased()) {
    // A peer's stream may still write into this rank's line: kept for the
    // process's life (the views of other processes' areas close).
    destroyChannels();
    regions_.reset();
    for (PeerView& peer : peers_) peer.opened.reset();
    return;
  }
  // A peer may still be reading this rank's scratch in the last calls (its
  // stream behind this one's): freeing the memory under it would be
  // undefined. Its word in this rank's line says when it has finished (its
  // last write of the call); likewise a receiver copying this rank's last
  // pieces out. A peer that never made those calls is waited for a while
  // only.
  const uint64_t last = sequence_.load(std::memory_order_acquire);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool piecesLeft = false;
  for (int r = 0; ready_ && r < size(); ++r) {
    try {
      while (r != rank_ && runtime_.loadValue(doneBy(rank_, r)) < last && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      const auto i = static_cast<size_t>(r);
      while (runtime_.loadValue(takenBy(rank_, r)) < sendPieces_[i] && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      piecesLeft = piecesLeft || runtime_.loadValue(sent(r)) < sendPieces_[i] ||
                   runtime_.loadValue(received(r)) < receivePieces_[i] ||
                   runtime_.loadValue(takenBy(rank_, r)) < sendPieces_[i];
    } catch (const Error& e) {
      LOOM_WARN(Init, "rank %d's flags: %s", r, e.what());
    }
  }
  if (piecesLeft) {
    // A message its peer never took or sent: its channel's stream waits on
    // this rank's line, which is then kept, raised.
    LOOM_WARN(Init, "a resident send or receive never met its peer: the area is kept, released");
    release();
    destroyChannels();
    regions_.reset();
    for (PeerView& peer : peers_) peer.opened.reset();
    return;
  }
  destroyChannels();
  regions_.reset();  // closes the peers' buffers it opened
  peers_.clear();    // closes the views of other processes' areas
  runtime_.freeDevice(own_);
}

uint64_t* ResidentArea::arrivedFrom(int owner, int writer) const {
  return reinterpret_cast<uint64_t*>(peers_[static_cast<size_t>(owner)].base + kArrivedAt) + writer;
}

uint64_t* ResidentArea::doneBy(int owner, int reader) const {
  return reinterpret_cast<uint64_t*>(peers_[static_cast<size_t>(owner)].base + kDoneByAt) + reader;
}

uint64_t* ResidentArea::reducedFrom(int owner, int writer) const {
  return reinterpret_cast<uint64_t*>(peers_[static_cast<size_t>(owner)].base + kReducedAt) + writer;
}

uint64_t* ResidentArea::finished() const { return reinterpret_cast<uint64_t*>(own_ + kFinishedAt); }

std::optional<RegionPlace> ResidentArea::placeForPeers(const void* p) {
  if (runtime_.deviceOf(p) != device_ || (!oneDevice_ && runtime_.fromMemoryPool(p))) return std::nullopt;
  if (sharesAddresses_) return RegionPlace{.region = 0, .offset = reinterpret_cast<uintptr_t>(p)};
  return regions_ != nullptr ? regions_->placeOf(p) : std::nullopt;
}

RegionPlace ResidentArea::placeOfStreamMemory(const void* p) {
  const std::optional<RegionPlace> place = placeForPeers(p);
  if (!place) {
    throw Error(loomInvalidUsage, "rank " + std::to_string(rank_) + ": the call's CUDA stream is not on the communicator's GPU");
  }
  return *place;
}

RegionPlace ResidentArea::areaPlace(const std::byte* p) const {
  return {.region = 1, .offset = static_cast<uint64_t>(p - own_)};
}

void ResidentArea::openPeersRegions() {
  if (regions_ != nullptr) regions_->openNew();
}

uint64_t* ResidentArea::regionBases(int owner) const {
  return reinterpret_cast<uint64_t*>(own_ + kRegionBasesAt + static_cast<size_t>(owner) * kRegionTableBytes);
}

PlaceView ResidentArea::view(const PublishedPiece* place, int owner) const {
  return {.place = place, .bases = regionBases(owner)};
}

PublishedPiece* ResidentArea::published(int owner, uint64_t sequence) const {
  return reinterpret_cast<PublishedPiece*>(peers_[static_cast<size_t>(owner)].base + kPublishedAt) + sequence % 2;
}

uint64_t* ResidentArea::sentTo(int owner, int sender) const {
  return reinterpret_cast<uint64_t*>(peers_[static_cast<size_t>(owner)].base + kSentToAt) + sender;
}

uint64_t* ResidentArea::takenBy(int owner, int receiver) const {
  return reinterpret_cast<uint64_t*>(peers_[static_cast<size_t>(owner)].base + kTakenByAt) + receiver;
}

uint64_t* ResidentArea::sent(int to) const { return reinterpret_cast<uint64_t*>(own_ + kSentAt) + to; }

uint64_t* ResidentArea::received(int from) const { return reinterpret_cast<uint64_t*>(own_ + kReceivedAt) + from; }

PublishedPiece* ResidentArea::p2pPublished(int owner, int receiver, uint64_t piece) const {
  const size_t entry = 2 * static_cast<size_t>(receiver) + piece % 2;
  return reinterpret_cast<PublishedPiece*>(peers_[static_cast<size_t>(owner)].base + kP2pPublishedAt) + entry;
}

std::byte* ResidentArea::p2pSlot(int owner, int receiver, uint64_t piece) const {
  const size_t slot = 2 * static_cast<size_t>(receiver) + piece % 2;
  return peers_[static_cast<size_t>(owner)].base + kFlagBytes + scratchBytes_ + slot * kP2pSlotBytes;
}

void* ResidentArea::channelStream(int peer, bool send) {
  std::lock_guard lock(callsMutex_);
  void*& stream = channelStreams_[2 * static_cast<size_t>(peer) + (send ? 1 : 0)];
  if (stream == nullptr) stream = runtime_.createStream();
  return stream;
}

uint64_t ResidentArea::beginSendPiece(int to, bool takenAtEnd) {
  std::lock_guard lock(callsMutex_);
  const uint64_t piece = ++sendPieces_[static_cast<size_t>(to)];
  pendingPieces_.push_back(
      {.send = true, .takenAtEnd = takenAtEnd, .peer = to, .piece = piece, .queued = std::chrono::steady_clock::now()});
  return piece;
}

uint64_t ResidentArea::beginReceivePiece(int from) {
  std::lock_guard lock(callsMutex_);
  const uint64_t piece = ++receivePieces_[static_cast<size_t>(from)];
  pendingPieces_.push_back({.send = false, .peer = from, .piece = piece, .queued = std::chrono::steady_clock::now()});
  return piece;
}

std::optional<std::string> ResidentArea::overduePiece(std::chrono::milliseconds timeout) {
  // One read of each channel's word (a copy from a GPU's memory each).
  std::map<std::pair<bool, int>, uint64_t> reached;
  std::erase_if(pendingPieces_, [&](const PendingPiece& p) {
    const auto [at, fresh] = reached.try_emplace({p.send, p.peer}, 0);
    if (fresh) at->second = runtime_.loadValue(p.send ? sent(p.peer) : received(p.peer));
    return at->second >= p.piece;
  });
  const auto now = std::chrono::steady_clock::now();
  for (const PendingPiece& p : pendingPieces_) {
    if (now - p.queued <= timeout) continue;
    // The peer's part, if it is the peer's: a send waits for the receiver to
    // have taken the piece two before (its slot), or, read in place, this
    // piece itself; a receive waits for the piece.
    const uint64_t taken = p.send ? runtime_.loadValue(takenBy(rank_, p.peer)) : 0;
    const bool peersPart = !p.send        ? runtime_.loadValue(sentTo(rank_, p.peer)) < p.piece
                           : p.takenAtEnd ? taken < p.piece
                                          : p.piece > 2 && taken < p.piece - 2;
    if (!peersPart) continue;  // the stream itself is behind: the user's work, not a peer's
    return std::string("resident ") + (p.send ? "send to" : "receive from") + " rank " + std::to_string(p.peer) +
           " on the stream (piece " + std::to_string(p.piece) + "): rank " + std::to_string(p.peer) +
           (p.send ? " never received" : " never sent") + " within " + std::to_string(timeout.count()) +
           " ms (LOOM_TIMEOUT_MS)";
  }
  return std::nullopt;
}

void ResidentArea::claimStream(void* stream) {
  // CUDA's special handles (cudaStreamLegacy, cudaStreamPerThread) name a
  // stream per device or per thread, not one stream.
  if (claims_ == nullptr || reinterpret_cast<uintptr_t>(stream) <= 2) return;
  const uint64_t next = sequence_.load(std::memory_order_relaxed) + 1;
  std::lock_guard lock(claims_->mutex);
  const auto [at, fresh] = claims_->last.try_emplace(stream, rank_, next);
  if (!fresh && at->second.first != rank_ && at->second.second == next) {
    throw Error(loomInvalidUsage, "rank " + std::to_string(rank_) + " queues resident call #" + std::to_string(next) +
                                      " on the CUDA stream on which rank " + std::to_string(at->second.first) +
                                      " queued its part of the same call: that part waits for this rank's, which "
                                      "would wait behind it, and neither would ever run; give each rank its own stream");
  }
  at->second = {rank_, next};
}

void ResidentArea::claimPointToPoint(std::span<const MessageClaim> messages, void* stream) {
  if (claims_ == nullptr) return;
  using WordKey = std::tuple<int, int, bool>;  // (sender, receiver, taken)
  struct Gives {
    WordKey word;
    uint64_t upTo;
  };
  std::vector<Gives> gives;
  std::vector<Gives> waits;
  {
    // The pieces' numbers, as beginSendPiece and beginReceivePiece will give them.
    std::lock_guard lock(callsMutex_);
    std::vector<uint64_t> sent = sendPieces_, received = receivePieces_;
    for (const MessageClaim& m : messages) {
      if (m.pieces == 0) continue;
      uint64_t& count = (m.send ? sent : received)[static_cast<size_t>(m.peer)];
      count += m.pieces;
      if (m.send) {
        gives.push_back({{rank_, m.peer, false}, count});
        const uint64_t waited = m.takenAtEnd ? count : count > 2 ? count - 2 : 0;
        if (waited != 0) waits.push_back({{rank_, m.peer, true}, waited});
      } else {
        gives.push_back({{m.peer, rank_, true}, count});
        waits.push_back({{m.peer, rank_, false}, count});
      }
    }
  }
  // CUDA's special handles name a stream per device or per thread (claimStream).
  const bool oneStream = reinterpret_cast<uintptr_t>(stream) > 2;
  std::lock_guard lock(claims_->mutex);
  // The group's messages run side by side (a stream per channel), so only
  // what was queued before the group can wait for what it gives.
  for (const Gives& g : gives) {
    const StreamClaims::Word& word = claims_->words[g.word];
    for (const StreamClaims::Wait& w : word.waits) {
      if (!oneStream || w.stream != stream || w.upTo <= word.given) continue;
      const auto [sender, receiver, taken] = g.word;
      throw Error(loomInvalidUsage,
                  taken ? "rank " + std::to_string(rank_) + " queues its receive from rank " + std::to_string(sender) +
                              " on the CUDA stream on which rank " + std::to_string(w.rank) +
                              " queued a send to it that waits for that receive (a send of more than two pieces of " +
                              std::to_string(kP2pSlotBytes >> 10) +
                              " KiB waits for its receiver): the send waits for a receive queued behind it, and "
                              "neither would ever run; give each rank its own stream"
                        : "rank " + std::to_string(rank_) + " queues its send to rank " + std::to_string(receiver) +
                              " on the CUDA stream on which rank " + std::to_string(w.rank) +
                              " queued its receive of it: the receive waits for a send queued behind it, and neither "
                              "would ever run; give each rank its own stream");
    }
  }
  for (const Gives& g : gives) {
    StreamClaims::Word& word = claims_->words[g.word];
    word.given = std::max(word.given, g.upTo);
    std::erase_if(word.waits, [&](const StreamClaims::Wait& w) { return w.upTo <= word.given; });
  }
  for (const Gives& w : waits) {
    StreamClaims::Word& word = claims_->words[w.word];
    if (oneStream && w.upTo > word.given) word.waits.push_back({.upTo = w.upTo, .stream = stream, .rank = rank_});
  }
}

uint64_t ResidentArea::beginCall(bool readersAtEnd) {
  const uint64_t sequence = ++sequence_;
  std::lock_guard lock(callsMutex_);
  unfinished_.push_back({.sequence = sequence, .queued = std::chrono::steady_clock::now(), .readersAtEnd = readersAtEnd});
  return sequence;
}

std::optional<std::string> ResidentArea::overdue(std::chrono::milliseconds timeout) {
  std::lock_guard lock(callsMutex_);
  try {
    if (auto piece = overduePiece(timeout)) return piece;
  } catch (const Error& e) {
    return std::string("resident point-to-point: its flags cannot be read: ") + e.what();
  }
  if (unfinished_.empty()) return std::nullopt;
  try {
    const uint64_t done = runtime_.loadValue(finished());
    while (!unfinished_.empty() && unfinished_.front().sequence <= done) unfinished_.pop_front();
    if (unfinished_.empty()) return std::nullopt;
    const auto [sequence, queued, readersAtEnd] = unfinished_.front();
    const auto waited = std::chrono::steady_clock::now() - queued;
    if (waited <= timeout) return std::nullopt;
    // Whom it waits for: ranks whose input never arrived, else ranks still
    // reading this rank's scratch from the call before.
    std::string missing;
    for (int r = 0; r < size(); ++r) {
      if (r != rank_ && runtime_.loadValue(arrivedFrom(rank_, r)) < sequence) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    std::string what = "never arrived";
    if (missing.empty()) {
      // A two-shot all-reduce waiting for shares: this rank has written its
      // own (its word in its own line says so) and a peer has not.
      const bool secondWait = runtime_.loadValue(reducedFrom(rank_, rank_)) >= sequence;
      for (int r = 0; secondWait && r < size(); ++r) {
        if (r != rank_ && runtime_.loadValue(reducedFrom(rank_, r)) < sequence)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      what = "never reduced their share";
    }
    if (missing.empty()) {
      // A call reading its peers' windows in place waits at its end until
      // every peer has read this rank's input; a call through the scratch
      // waits before it publishes until every peer has read its slot.
      what = readersAtEnd ? "never finished reading this rank's input"
                          : "never finished reading this rank's scratch from the call before the last";
      const uint64_t read = readersAtEnd ? sequence : sequence - 2;
      for (int r = 0; r < size(); ++r) {
        if (r != rank_ && (readersAtEnd || sequence > 2) && runtime_.loadValue(doneBy(rank_, r)) < read) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
      }
    }
    if (missing.empty()) return std::nullopt;  // the stream itself is behind: the user's work, not a peer's
    return "resident collective #" + std::to_string(sequence) + " on the stream: rank(s) " + missing + " " + what +
           " within " + std::to_string(timeout.count()) + " ms (LOOM_TIMEOUT_MS)";
  } catch (const Error& e) {
    return "resident call #" + std::to_string(unfinished_.front().sequence) + ": its flags cannot be read: " + e.what();
  }
}

std::byte* ResidentArea::slot(int r, uint64_t sequence) const {
  return peers_[static_cast<size_t>(r)].base + kFlagBytes + (sequence % 2) * slotBytes();
}

void ResidentArea::release() noexcept {
  std::lock_guard lock(releaseMutex_);
  if (!ready_ || released_) return;
  released_ = true;
  constexpr uint64_t kPastAll = std::numeric_limits<uint64_t>::max();
  try {
    for (int r = 0; r < size(); ++r) {
      runtime_.storeValue(arrivedFrom(rank_, r), kPastAll);
      runtime_.storeValue(doneBy(rank_, r), kPastAll);
      runtime_.storeValue(reducedFrom(rank_, r), kPastAll);
      runtime_.storeValue(sentTo(rank_, r), kPastAll);
      runtime_.storeValue(takenBy(rank_, r), kPastAll);
    }
    runtime_.storeValue(finished(), kPastAll);
  } catch (const Error& e) {
    LOOM_WARN(Init, "releasing the streams that wait on this rank's flags: %s", e.what());
  }
}

}  // namespace loom
