#include "collectives/resident_collectives.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/counters.hpp"
#include "base/datatype.hpp"
#include "base/device/call_buffer.hpp"
#include "base/device/memop_batch.hpp"
#include "base/device/runtime.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "collectives/device_kernels.hpp"

namespace loom::coll {
namespace {

bool onDevice(memory::MemoryKind kind, size_t bytes) {
  return bytes == 0 || kind == memory::MemoryKind::CudaDevice;
}

// Whether `c`'s input is n blocks (each rank sends a block to each rank).
bool sendsBlocks(CollectiveKind kind) {
  return kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AlltoAll || kind == CollectiveKind::Scatter;
}

// One piece of a call: elements [first, first + count) of each block, laid
// in a slot as `count` elements, or n such runs side by side for an input in
// blocks.
struct Piece {
  size_t first = 0;  // elements into each block
  size_t count = 0;  // elements of each block
};

// Where every rank's part of a piece lies, for the read step: rank r's
// block b at base + b x pitch, and in two shots its reduced share in its
// result, at the share's offset. Two kinds: places this rank knows when it
// queues the call (Known: the windows), and places the ranks published for
// the kernels to load when they run (Published: a piece's, each rank's
// slot or its own buffer).
class Parts {
 public:
  virtual ~Parts() = default;
  // dst <- op over every rank's block `block`, `at` bytes into it.
  virtual void reduce(const Collective& c, cpu::ReduceOp op, size_t block, size_t at, void* dst, size_t count,
                      void* stream) const = 0;
  // dst <- rank r's block `block` (its result: `result`), `at` bytes in.
  virtual void copy(int r, bool result, size_t block, size_t at, void* dst, size_t bytes, void* stream) const = 0;
};

class Known final : public Parts {
 public:
  // Rank r's input's first block, its result (two shots), the blocks' pitch.
  using Place = std::function<const std::byte*(int r)>;
  Known(int ranks, Place input, Place result, size_t pitch)
      : ranks_(ranks), input_(std::move(input)), result_(std::move(result)), pitch_(pitch) {}
  void reduce(const Collective& c, cpu::ReduceOp op, size_t block, size_t at, void* dst, size_t count,
              void* stream) const override {
    std::vector<const void*> sources(static_cast<size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) sources[static_cast<size_t>(r)] = input_(r) + block * pitch_ + at;
    deviceKernels().reduce(c.type, op, sources, dst, count, 1.0, stream);
  }
  void copy(int r, bool result, size_t block, size_t at, void* dst, size_t bytes, void* stream) const override {
    const std::byte* from = result ? result_(r) + at : input_(r) + block * pitch_ + at;
    deviceKernels().copy(dst, from, bytes, stream);
  }

 private:
  int ranks_;
  Place input_, result_;
  size_t pitch_;
};

class Published final : public Parts {
 public:
  // `into`: the bytes of this piece from the call's first, by which a
  // range's places move (published_piece.hpp).
  Published(const ResidentArea& area, uint64_t sequence, uint64_t into) : sequence_(sequence) {
    for (int r = 0; r < area.size(); ++r) {
      PlaceView view = area.view(area.published(r, sequence), r);
      view.other = area.published(r, sequence + 1);
      view.into = into;
      places_.push_back(view);
    }
  }
  void reduce(const Collective& c, cpu::ReduceOp op, size_t block, size_t at, void* dst, size_t count,
              void* stream) const override {
    deviceKernels().reduceFrom(c.type, op, places_, sequence_, block, at, dst, count, stream);
  }
  void copy(int r, bool result, size_t block, size_t at, void* dst, size_t bytes, void* stream) const override {
    cuda::runtime().copyFromPlace(dst, places_[static_cast<size_t>(r)], sequence_, result, block, at, bytes, stream);
  }
  std::span<const PlaceView> places() const { return places_; }

 private:
  uint64_t sequence_;
  std::vector<PlaceView> places_;
};

// What the read step sums: a PreMulSum's inputs were scaled as they were
// published.
cpu::ReduceOp readOp(const Collective& c) {
  return c.reduction.op == cpu::ReduceOp::PreMulSum ? cpu::ReduceOp::Sum : c.reduction.op;
}

// Whether `c`'s read step folds the ranks' parts (else it copies them).
bool folds(const Collective& c) {
  return c.kind == CollectiveKind::AllReduce || c.kind == CollectiveKind::Reduce ||
         c.kind == CollectiveKind::ReduceScatter;
}

// The copies of the read step of `c`'s piece `p`, for this rank, where it
// copies (a gather's, broadcast's or all-to-all's): out of which rank's
// part, which of its blocks, into where in the user's output.
std::vector<PlaceCopy> copiesOf(const ResidentArea& area, const Collective& c, const Piece& p) {
  const int n = area.size();
  const int me = area.rank();
  const size_t into = p.first * c.typeSize;  // of the piece into each block
  const auto out = [&](int r) { return c.recv + static_cast<size_t>(r) * c.blockBytes() + into; };
  const auto mine = static_cast<uint64_t>(me);
  std::vector<PlaceCopy> copies;
  const auto add = [&](int r, uint64_t block, std::byte* dst) {
    copies.push_back({.rank = static_cast<uint32_t>(r), .block = block, .dst = dst, .bytes = p.count * c.typeSize});
  };
  switch (c.kind) {
    case CollectiveKind::AllGather:
      for (int r = 0; r < n; ++r) add(r, 0, out(r));
      break;
    case CollectiveKind::Broadcast:
      add(c.root, 0, c.recv + into);
      break;
    case CollectiveKind::AlltoAll:
      for (int r = 0; r < n; ++r) add(r, mine, out(r));
      break;
    case CollectiveKind::Gather:
      for (int r = 0; me == c.root && r < n; ++r) add(r, 0, out(r));
      break;
    case CollectiveKind::Scatter:
      add(c.root, mine, c.recv + into);
      break;
    default:  // the reductions fold
      break;
  }
  return copies;
}

// The read step of `c`'s piece `p`, for this rank: from every rank's part,
// queued on the batch's stream.
void read(const ResidentArea& area, const Collective& c, const Piece& p, const Parts& parts, cuda::MemopBatch& q) {
  void* stream = q.stream();
  const cpu::ReduceOp op = readOp(c);
  const int me = area.rank();
  const size_t into = p.first * c.typeSize;  // of the piece into each block
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      parts.reduce(c, op, 0, 0, c.recv + into, p.count, stream);
      break;
    case CollectiveKind::Reduce:
      if (me == c.root) parts.reduce(c, op, 0, 0, c.recv + into, p.count, stream);
      break;
    case CollectiveKind::ReduceScatter:
      parts.reduce(c, op, static_cast<size_t>(me), 0, c.recv + into, p.count, stream);
      break;
    default:
      for (const PlaceCopy& k : copiesOf(area, c, p)) {
        parts.copy(static_cast<int>(k.rank), false, k.block, 0, k.dst, k.bytes, stream);
      }
      break;
  }
}

// Rank r's share of `count` elements in two shots: [first, end), a
// contiguous n-th, as even as the count allows.
std::pair<size_t, size_t> shareOf(size_t count, int r, int n) {
  const auto at = [&](int q) { return count * static_cast<size_t>(q) / static_cast<size_t>(n); };
  return {at(r), at(r + 1)};
}

// The read step of an all-reduce's piece of `count` elements in two shots:
// rank r owns share r (a contiguous n-th, as even as the count allows); it
// reduces its share of every rank's input in rank order (the one-shot read's
// bits, element for element) into `out`, averaged there, puts it in its
// result (`myResult`, where its peers read it) when that is not `out`
// itself (its scratch slot, where its share of its input was: no other rank
// reads that part), and says "reduced"; then it copies every other rank's
// share out of that rank's result. A rank reads about 2x the piece instead
// of n x, for one more round of flags.
void readTwoShots(const ResidentArea& area, const Collective& c, size_t count, std::byte* out, const Parts& parts,
                  std::byte* myResult, uint64_t sequence, cuda::MemopBatch& q) {
  cuda::DeviceRuntime& rt = cuda::runtime();
  DeviceKernels& kernels = deviceKernels();
  const int n = area.size();
  const int me = area.rank();
  const auto [first, end] = shareOf(count, me, n);
  if (end > first) {
    const size_t at = first * c.typeSize;
    parts.reduce(c, readOp(c), 0, at, out + at, end - first, q.stream());
    if (c.reduction.average) kernels.average(c.type, out + at, end - first, n, q.stream());
    if (myResult != out) rt.copy(myResult + at, out + at, (end - first) * c.typeSize, q.stream());
  }
  for (int r = 0; r < n; ++r) q.write(area.reducedFrom(r, me), sequence);  // its own word too
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    q.wait(area.reducedFrom(me, r), sequence);
    const auto [from, to] = shareOf(count, r, n);
    if (to > from) {
      parts.copy(r, true, 0, from * c.typeSize, out + from * c.typeSize, (to - from) * c.typeSize, q.stream());
    }
  }
}

// Whether `c` (resident) runs its pieces in two shots: an all-reduce of 3 or
// more ranks (with 2, each rank reads 2x the piece either way) of at least
// the area's bytes.
bool twoShot(const ResidentArea& area, const Collective& c) {
  return c.kind == CollectiveKind::AllReduce && area.size() >= 3 && area.twoShotFromBytes() != 0 &&
         c.count * c.typeSize >= area.twoShotFromBytes();
}

// Where a rank's peers read its input (and in two shots its result) in
// place: the places of its own buffers (or of a call's own copy of them,
// runWhole). `sharedResult`: in two shots, where the rank puts its reduced
// share for its peers when that is not its result (nullptr: the result).
struct InPlace {
  RegionPlace input, result;
  std::byte* sharedResult = nullptr;
};

// Whether this rank offers its own input to be read in place, and where:
// its send buffer where every rank's kernels may read it
// (ResidentArea::placeForPeers: threads of one process, or processes that
// opened its allocation), read as it lies (no PreMulSum scaling on the way
// in), and, in place, only where no peer reads what the rank writes: an
// all-reduce's result overwrites the input every peer reads, so it goes
// through the scratch; in place, an all-gather or a broadcast's root writes
// its own part onto itself (a copy skipped), a reduce-scatter its own
// block, which its peers never read, and a reduce, gather or scatter has no
// other reader of what the root writes (NCCL's layouts, the only overlaps
// the API lets through), unless it puts its result aside (resultAside).
// Each rank answers for itself: its readers load whichever place it
// published.
std::optional<InPlace> offersInPlace(ResidentArea& area, const Collective& c, bool twoShots, bool putsResultAside) {
  if (c.sendBytes == 0 || c.reduction.op == cpu::ReduceOp::PreMulSum) return std::nullopt;
  const bool overlaps = c.recvBytes != 0 && c.recv < c.send + c.sendBytes && c.send < c.recv + c.recvBytes;
  const bool overwritesItsInput =
      c.kind == CollectiveKind::AlltoAll || (c.kind == CollectiveKind::AllReduce && !putsResultAside);
  if (overlaps && overwritesItsInput) return std::nullopt;
  // In two shots its peers copy its reduced share out of its result. Both
  // asked (a process's first call on an allocation publishes it).
  const std::optional<RegionPlace> input = area.placeForPeers(c.send);
  const std::optional<RegionPlace> result = twoShots ? area.placeForPeers(c.recv) : RegionPlace{};
  if (!input || !result) return std::nullopt;
  return InPlace{.input = *input, .result = *result};
}

// Whether this rank's all-reduce in place of more than one piece, in one
// shot, puts its result aside: into memory of the call's own, copied over its
// buffer at the call's end, so that its peers may read its input where it
// lies (offersInPlace) instead of a copy of each piece in its scratch. The
// pieces then take one round of flags for the call, where through the
// scratch each took one (processes time-sliced on one GPU pay a context
// switch for each). Not in two shots, where peers read the result; not for
// a PreMulSum, whose input is scaled as it is published. Each rank decides
// for itself: its peers load whichever place it published.
bool resultAside(const Collective& c, bool twoShots, size_t pieceCount) {
  return c.kind == CollectiveKind::AllReduce && c.send == c.recv && !twoShots && pieceCount > 1 &&
         c.reduction.op != cpu::ReduceOp::PreMulSum;
}

// Whether `c`'s piece `p` runs its round of flags and its read as one piece
// of work (DeviceKernels::reduceFromBetween, copyFromBetween: one kernel on
// a GPU, which polls the flags itself) instead of its kernels and copies
// between two batches of stream memory operations: a call of at most
// LOOM_DEVICE_ONE_KERNEL_BYTES (of each block) in one piece, one shot, on
// ranks whose kernels run at once (threads of one process on one GPU),
// where this rank's input is read where it lies or it has none (nothing
// copied into its slot first), and a fold folds the parts as they lie (no
// PreMulSum, no average after). A rank with nothing to read (a reduce's or
// gather's other ranks) runs the flags alone. The flags are the same either
// way, so each rank decides for itself.
bool readsBetweenFlags(const ResidentArea& area, const Collective& c, const Piece& p, bool twoShots,
                       const std::optional<InPlace>& inPlace, size_t count) {
  const bool staged = !inPlace && c.sendBytes != 0;
  const bool asTheyLie = !folds(c) || (c.reduction.op != cpu::ReduceOp::PreMulSum && !c.reduction.average);
  return area.sharesEveryBuffer() && !staged && !twoShots && count == 1 && asTheyLie &&
         p.count * c.typeSize <= area.oneKernelBytes();
}

// One piece as one resident call: publish, read, release. `inPlace`: where
// this rank's part is read where it lies (offersInPlace); piece `index` of
// `count`, after the last of which such a rank waits until every peer has
// read its input. Such a rank's part of every piece lies in its own buffer,
// so it publishes them all with the first, as a range, and "arrived" up to
// the last: its later pieces publish nothing and wait for no reader, and its
// readers' streams never wait for it between pieces (processes time-sliced
// on one GPU pay a context switch for each wait that finds a peer behind).
void runPiece(ResidentArea& area, const Collective& c, const Piece& p, bool twoShots,
              const std::optional<InPlace>& inPlace, size_t index, size_t count, cuda::MemopBatch& q) {
  cuda::DeviceRuntime& rt = cuda::runtime();
  const int n = area.size();
  const int me = area.rank();
  const bool waitReaders = inPlace && index + 1 == count;
  const uint64_t sequence = area.beginCall(waitReaders);
  const uint64_t further = inPlace ? count - 1 - index : 0;  // pieces after this one, published with it
  const bool publishes = !inPlace || index == 0;
  const size_t bytes = p.count * c.typeSize;  // of each block's piece
  // Publish: nobody still reads this call's slot, nor its published places
  // (last used two calls ago); the input's piece in; said so to each rank.
  for (int r = 0; publishes && sequence > 2 && r < n; ++r) {
    if (r != me) q.wait(area.doneBy(me, r), sequence - 2);
  }
  RegionPlace input, result;
  size_t pitch = 0;
  if (inPlace) {
    input = past(inPlace->input, p.first * c.typeSize);
    result = past(inPlace->result, p.first * c.typeSize);
    pitch = c.blockBytes();
  } else if (c.sendBytes != 0) {
    const std::byte* from = c.send + p.first * c.typeSize;
    const size_t blocks = sendsBlocks(c.kind) ? static_cast<size_t>(n) : 1;
    std::byte* to = area.slot(me, sequence);
    if (c.reduction.op == cpu::ReduceOp::PreMulSum) {  // scaled on the way in, as the host path scales its input
      for (size_t b = 0; b < blocks; ++b) {
        const void* source = from + b * c.blockBytes();
        deviceKernels().reduce(c.type, cpu::ReduceOp::PreMulSum, std::span(&source, 1), to + b * bytes, p.count,
                               c.reduction.scalar, q.stream());
      }
    } else if (blocks > 1) {  // the piece of each of n blocks, side by side
      rt.copyRows(to, bytes, from, c.blockBytes(), bytes, blocks, q.stream());
    } else {
      rt.copy(to, from, bytes, q.stream());
    }
    input = result = area.areaPlace(to);
    pitch = bytes;
  }
  if (c.sendBytes != 0 && publishes) {
    // Into its own line, the sequence last, before "arrived": each write on
    // the stream follows the ones before it. The result only where it is
    // read (two shots).
    PublishedPiece* entry = area.published(me, sequence);
    q.write(&entry->input, input.offset);
    q.write(&entry->pitch, pitch);
    if (twoShots) q.write(&entry->result, result.offset);
    q.write(&entry->regions, regionsOf(input.region, result.region, further));
    q.write(&entry->sequence, sequence);
  }
  for (int r = 0; publishes && r < n; ++r) {
    if (r != me) q.write(area.arrivedFrom(r, me), sequence + further);
  }
  // Read: once every rank's piece is in.
  for (int r = 0; r < n; ++r) {
    if (r != me) q.wait(area.arrivedFrom(me, r), sequence);
  }
  // Release: done reading, told to each owner and to the host's watch. An
  // input read in place stays the peers' until each is done with it (and
  // with every piece before, which it read first): the work after the call
  // on this stream may overwrite it.
  const auto release = [&](cuda::MemopBatch& b) {
    for (int r = 0; r < n; ++r) {
      if (r != me) b.write(area.doneBy(r, me), sequence);
    }
    for (int r = 0; waitReaders && r < n; ++r) {
      if (r != me) b.wait(area.doneBy(me, r), sequence);
    }
    b.write(area.finished(), sequence);
  };
  const Published parts(area, sequence, p.first * c.typeSize);
  if (readsBetweenFlags(area, c, p, twoShots, inPlace, count)) {
    const std::vector<cuda::MemOp> before = q.take();
    cuda::MemopBatch after(q.runtime(), q.stream());  // gathered only, for the kernel to run
    release(after);
    if (!folds(c)) {
      deviceKernels().copyFromBetween(parts.places(), sequence, copiesOf(area, c, p), before, after.take(), q.stream());
      return;
    }
    // As read() folds: a reduce-scatter this rank's block, a reduce at its root alone.
    const size_t block = c.kind == CollectiveKind::ReduceScatter ? static_cast<size_t>(me) : 0;
    const bool hasResult = c.kind != CollectiveKind::Reduce || me == c.root;
    deviceKernels().reduceFromBetween(c.type, readOp(c), parts.places(), sequence, block, 0,
                                      hasResult ? c.recv + p.first * c.typeSize : nullptr, hasResult ? p.count : 0,
                                      before, after.take(), q.stream());
    return;
  }
  if (twoShots) {
    std::byte* out = c.recv + p.first * c.typeSize;
    std::byte* shared = !inPlace ? area.slot(me, sequence)
                        : inPlace->sharedResult != nullptr ? inPlace->sharedResult + p.first * c.typeSize
                                                           : out;
    readTwoShots(area, c, p.count, out, parts, shared, sequence, q);
  } else {
    read(area, c, p, parts, q);
  }
  // An average divides the sum, as the host path does (two shots divided
  // each share).
  const bool hasResult = c.kind != CollectiveKind::Reduce || me == c.root;
  if (c.reduction.average && hasResult && !twoShots) {
    deviceKernels().average(c.type, c.recv + p.first * c.typeSize, p.count, n, q.stream());
  }
  release(q);
}

// Whether `c` runs as one piece, its ranks reading each other's buffers
// where they lie (runWhole): a call of more than one piece through the
// scratch (`perPiece` elements of each block), each a round of flags, on
// ranks whose kernels reach each other's buffers (threads of one process on
// one GPU: ResidentArea::sharesEveryBuffer). Every rank answers alike.
bool wholeCall(const ResidentArea& area, const Collective& c, size_t perPiece) {
  return area.sharesEveryBuffer() && c.count > perPiece;
}

// Where this rank's place in a whole call lies (runWhole): where its peers
// read its input, and in two shots its reduced share; `copies` holds the
// call's own copies where they may not read its buffers as they lie.
// Nullopt where it has no input (a broadcast's or a scatter's non-root).
std::optional<InPlace> wholePlaces(ResidentArea& area, const Collective& c, bool twoShots,
                                   std::vector<std::unique_ptr<cuda::CallBuffer>>& copies, cuda::MemopBatch& q) {
  if (c.sendBytes == 0) return std::nullopt;
  // A PreMulSum's input is read scaled; a buffer off this GPU is out of the
  // peers' reach. (No overlap needs a copy: an all-to-all never runs in
  // place, and the other kinds' layouts in place are offersInPlace's.)
  const bool asItLies = c.reduction.op != cpu::ReduceOp::PreMulSum;
  std::optional<RegionPlace> input = asItLies ? area.placeForPeers(c.send) : std::nullopt;
  if (!input) {
    std::byte* copy = copies.emplace_back(std::make_unique<cuda::CallBuffer>(c.sendBytes, q))->data();
    if (c.reduction.op == cpu::ReduceOp::PreMulSum) {
      const void* source = c.send;
      deviceKernels().reduce(c.type, cpu::ReduceOp::PreMulSum, std::span(&source, 1), copy, c.sendBytes / c.typeSize,
                             c.reduction.scalar, q.stream());
    } else {
      cuda::runtime().copy(copy, c.send, c.sendBytes, q.stream());
    }
    input = area.placeOfStreamMemory(copy);
  } else {
    counters::add(counters::Counter::ResidentCallsOfferedInPlace);
  }
  InPlace places{.input = *input, .result = {}};
  if (twoShots) {
    if (const std::optional<RegionPlace> result = area.placeForPeers(c.recv)) {
      places.result = *result;
    } else {
      places.sharedResult = copies.emplace_back(std::make_unique<cuda::CallBuffer>(c.recvBytes, q))->data();
      places.result = area.placeOfStreamMemory(places.sharedResult);
    }
  }
  return places;
}

// `c` as one piece, every rank reading every other's buffers where they lie
// (wholeCall), as calls in symmetric windows do: publish, read, release
// once, instead of a round of flags per slot of input. Each rank offers its
// send buffer, or a copy of it in memory of the call's own where its peers
// may not read it as it lies (wholePlaces), and waits at the call's end
// until every peer is done reading it. An all-reduce reads in two shots:
// each rank writes into its result first its own share alone, which no
// peer reads of its input, and the others' only once their owners have said
// "reduced" (done reading that share of every input), so an all-reduce in
// place reads in place too; a rank so reads 1.5x the call (2 ranks) to 2x
// (many), where one shot reads n x.
void runWhole(ResidentArea& area, const Collective& c, cuda::MemopBatch& q) {
  const bool twoShots = c.kind == CollectiveKind::AllReduce;
  std::vector<std::unique_ptr<cuda::CallBuffer>> copies;  // freed on the stream behind the call
  const std::optional<InPlace> places = wholePlaces(area, c, twoShots, copies, q);
  runPiece(area, c, Piece{.first = 0, .count = c.count}, twoShots, places, 0, 1, q);
  q.flush();  // before the copies' frees go behind it
  counters::add(counters::Counter::ResidentWholeCalls);
}

// Where `c` reads its peers' inputs in place: an all-reduce, all-gather,
// reduce-scatter or all-to-all (every rank's input read) whose send buffer
// lies in a symmetric window, so at the same offset in every rank's (the
// caller's promise, NCCL's too), out of place (a rank must not write its
// result where a peer still reads its input; in place, every rank is in
// place alike), and needing no scaling on the way in (PreMulSum goes through
// the scratch, scaled as it is published).
std::optional<SymmetricWindows::Place> windowOf(const Communicator& comm, const Collective& c) {
  const bool everyInputRead = c.kind == CollectiveKind::AllReduce || c.kind == CollectiveKind::AllGather ||
                              c.kind == CollectiveKind::ReduceScatter || c.kind == CollectiveKind::AlltoAll;
  if (!everyInputRead || c.reduction.op == cpu::ReduceOp::PreMulSum || c.sendBytes == 0) return std::nullopt;
  const bool overlaps = c.recv < c.send + c.sendBytes && c.send < c.recv + c.recvBytes;
  if (overlaps) return std::nullopt;
  return comm.windows.find(c.send, c.sendBytes);
}

// `c` as one call that reads every rank's input where it lies, in its window:
// "arrived" once the stream gets here (the input is the stream's work before
// the call), the read, then "done" to every peer, and a wait until every peer
// is done with this rank's input, so that the work after the call on the
// stream may overwrite it. No copy in, no pieces.
void runInWindows(ResidentArea& area, const Collective& c, const SymmetricWindows::Place& place,
                  const std::optional<SymmetricWindows::Place>& twoShotsInto, cuda::MemopBatch& q) {
  const int n = area.size();
  const int me = area.rank();
  const uint64_t sequence = area.beginCall(/*readersAtEnd=*/true);
  for (int r = 0; r < n; ++r) {
    if (r != me) q.write(area.arrivedFrom(r, me), sequence);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) q.wait(area.arrivedFrom(me, r), sequence);
  }
  // Straight from the windows: every rank's input (and in two shots its
  // result) where it lies in its window.
  const auto at = [](const SymmetricWindows::Place& in) {
    return [&in](int r) -> const std::byte* { return in.window->peers[static_cast<size_t>(r)].base + in.offset; };
  };
  const Known windows(n, at(place), twoShotsInto ? at(*twoShotsInto) : at(place), c.blockBytes());
  if (twoShotsInto) {
    readTwoShots(area, c, c.count, c.recv, windows, c.recv, sequence, q);
  } else {
    read(area, c, Piece{.first = 0, .count = c.count}, windows, q);
    if (c.reduction.average) deviceKernels().average(c.type, c.recv, c.count, n, q.stream());
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) q.write(area.doneBy(r, me), sequence);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) q.wait(area.doneBy(me, r), sequence);
  }
  q.write(area.finished(), sequence);
}

}  // namespace

bool runsResident(const Communicator& comm, const Collective& c) {
  const ResidentArea* area = comm.resident();
  return area != nullptr && c.count != 0 && onDevice(c.sendKind, c.sendBytes) && onDevice(c.recvKind, c.recvBytes) &&
         area->slotBytes() / static_cast<size_t>(area->size()) >= c.typeSize;
}

void runResident(Communicator& comm, const Collective& c, void* stream) {
  ResidentArea* resident = comm.resident();
  if (resident == nullptr) throw Error(loomInternalError, "a resident collective on a communicator without its area");
  ResidentArea& area = *resident;
  area.claimStream(stream);
  area.openPeersRegions();
  // Every wait and write of the call gathered into batches, queued before
  // each copy or kernel and at the end.
  cuda::MemopBatch q(cuda::runtime(), stream);
  if (const auto place = windowOf(comm, c)) {
    // Two shots where the result lies in a window too, for the peers to
    // copy the shares out of.
    const auto into = twoShot(area, c) ? comm.windows.find(c.recv, c.recvBytes) : std::nullopt;
    runInWindows(area, c, *place, into, q);
    q.flush();
    counters::add(counters::Counter::ResidentCalls);
    counters::add(counters::Counter::ResidentCallsInWindows);
    return;
  }
  // Pieces of at most a slot of input: of a block, or of each of n blocks.
  const size_t blocks = sendsBlocks(c.kind) ? static_cast<size_t>(area.size()) : 1;
  const size_t perPiece = std::max<size_t>(1, area.slotBytes() / blocks / c.typeSize);
  if (wholeCall(area, c, perPiece)) {
    runWhole(area, c, q);
    counters::add(counters::Counter::ResidentCalls);
    return;
  }
  const bool twoShots = twoShot(area, c);
  const size_t pieceCount = (c.count + perPiece - 1) / perPiece;
  const bool aside = resultAside(c, twoShots, pieceCount);
  std::optional<InPlace> inPlace = offersInPlace(area, c, twoShots, aside);
  // The call as its pieces run it: an all-reduce in place whose input is
  // read where it lies writes its result aside, copied over its buffer once
  // every peer is done reading it (the last piece's release waits for that).
  Collective run = c;
  std::unique_ptr<cuda::CallBuffer> result;  // freed on the stream behind the call
  if (aside && inPlace) {
    try {
      result = std::make_unique<cuda::CallBuffer>(c.recvBytes, q);
      run.recv = result->data();
    } catch (const Error& e) {
      // The device's memory is the caller's (a framework's cache may hold
      // all of it): no room aside, so through the scratch, as before.
      LOOM_INFO(Coll, "an all-reduce in place through the scratch: no room for its result aside: %s", e.what());
      inPlace.reset();
    }
  }
  for (size_t index = 0; index < pieceCount; ++index) {
    const size_t first = index * perPiece;
    const size_t count = std::min(perPiece, c.count - first);
    runPiece(area, run, Piece{.first = first, .count = count}, twoShots, inPlace, index, pieceCount, q);
  }
  if (result != nullptr) cuda::runtime().copy(c.recv, run.recv, c.recvBytes, q.stream());
  q.flush();  // before the result's free goes behind it
  counters::add(counters::Counter::ResidentCalls);
  if (inPlace) counters::add(counters::Counter::ResidentCallsOfferedInPlace);
}

}  // namespace loom::coll
