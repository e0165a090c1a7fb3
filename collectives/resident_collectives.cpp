#include "collectives/resident_collectives.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/datatype.hpp"
#include "base/device/runtime.hpp"
#include "base/error.hpp"
#include "collectives/device_kernels.hpp"

namespace loom::coll {
namespace {

std::atomic<uint64_t> queued{0};
std::atomic<uint64_t> inWindows{0};

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

// Where rank r's part of block b of a piece's input is, for the read step:
// in r's scratch slot (published), or in r's window (read in place).
using Source = std::function<const std::byte*(int r, int b)>;

// The read step of `c`'s piece `p`, for this rank: from every rank's input
// as `source` finds it, queued on `stream`.
void read(const ResidentArea& area, const Collective& c, const Piece& p, const Source& source, void* stream) {
  DeviceKernels& kernels = deviceKernels();
  // A PreMulSum's inputs were scaled as they were published: the read sums.
  const cpu::ReduceOp op = c.reduction.op == cpu::ReduceOp::PreMulSum ? cpu::ReduceOp::Sum : c.reduction.op;
  const int n = area.size();
  const int me = area.rank();
  const size_t bytes = p.count * c.typeSize;              // of each block's piece
  const size_t into = p.first * c.typeSize;                // of the piece into each block
  const auto block = [&](int r) { return static_cast<size_t>(r) * c.blockBytes(); };  // in the user's buffer
  // Every rank's part of block b, in rank order.
  const auto all = [&](int b) {
    std::vector<const void*> sources(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) sources[static_cast<size_t>(r)] = source(r, b);
    return sources;
  };
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      kernels.reduce(c.type, op, all(0), c.recv + into, p.count, 1.0, stream);
      break;
    case CollectiveKind::Reduce:
      if (me == c.root) kernels.reduce(c.type, op, all(0), c.recv + into, p.count, 1.0, stream);
      break;
    case CollectiveKind::ReduceScatter:
      kernels.reduce(c.type, op, all(me), c.recv + into, p.count, 1.0, stream);
      break;
    case CollectiveKind::AllGather:
      for (int r = 0; r < n; ++r) kernels.copy(c.recv + block(r) + into, source(r, 0), bytes, stream);
      break;
    case CollectiveKind::Broadcast:
      kernels.copy(c.recv + into, source(c.root, 0), bytes, stream);
      break;
    case CollectiveKind::AlltoAll:
      for (int r = 0; r < n; ++r) kernels.copy(c.recv + block(r) + into, source(r, me), bytes, stream);
      break;
    case CollectiveKind::Gather:
      if (me != c.root) break;
      for (int r = 0; r < n; ++r) kernels.copy(c.recv + block(r) + into, source(r, 0), bytes, stream);
      break;
    case CollectiveKind::Scatter:
      kernels.copy(c.recv + into, source(c.root, me), bytes, stream);
      break;
  }
}

// Rank r's share of `count` elements in two shots: [first, end), a
// contiguous n-th, as even as the count allows.
std::pair<size_t, size_t> shareOf(size_t count, int r, int n) {
  const auto at = [&](int q) { return count * static_cast<size_t>(q) / static_cast<size_t>(n); };
  return {at(r), at(r + 1)};
}

// Where rank r's piece lies for a two-shot read: its input, or its reduced
// share (at the share's own offset) for the others to copy.
using PieceOf = std::function<std::byte*(int r)>;

// The read step of an all-reduce's piece of `count` elements in two shots:
// rank r owns share r (a contiguous n-th, as even as the count allows); it
// reduces its share of every rank's input in rank order (the one-shot read's
// bits, element for element) into `out`, averaged there, puts it where its
// peers read results when that is not `out` itself (its scratch slot, where
// its share of its input was: no other rank reads that part), and says
// "reduced"; then it copies every other rank's share out of that rank's
// result. A rank reads about 2x the piece instead of n x, for one more round
// of flags.
void readTwoShots(const ResidentArea& area, const Collective& c, size_t count, std::byte* out, const PieceOf& input,
                  const PieceOf& result, uint64_t sequence, void* stream) {
  cuda::DeviceRuntime& rt = cuda::runtime();
  DeviceKernels& kernels = deviceKernels();
  const cpu::ReduceOp op = c.reduction.op == cpu::ReduceOp::PreMulSum ? cpu::ReduceOp::Sum : c.reduction.op;
  const int n = area.size();
  const int me = area.rank();
  const auto [first, end] = shareOf(count, me, n);
  if (end > first) {
    const size_t at = first * c.typeSize;
    std::vector<const void*> sources(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) sources[static_cast<size_t>(r)] = input(r) + at;
    kernels.reduce(c.type, op, sources, out + at, end - first, 1.0, stream);
    if (c.reduction.average) kernels.average(c.type, out + at, end - first, n, stream);
    if (result(me) != out) rt.copy(result(me) + at, out + at, (end - first) * c.typeSize, stream);
  }
  for (int r = 0; r < n; ++r) rt.writeValue(stream, area.reducedFrom(r, me), sequence);  // its own word too
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    rt.waitValue(stream, area.reducedFrom(me, r), sequence);
    const auto [from, to] = shareOf(count, r, n);
    if (to > from) kernels.copy(out + from * c.typeSize, result(r) + from * c.typeSize, (to - from) * c.typeSize, stream);
  }
}

// Whether `c` (resident) runs its pieces in two shots: an all-reduce of 3 or
// more ranks (with 2, each rank reads 2x the piece either way) of at least
// the area's bytes.
bool twoShot(const ResidentArea& area, const Collective& c) {
  return c.kind == CollectiveKind::AllReduce && area.size() >= 3 && area.twoShotFromBytes() != 0 &&
         c.count * c.typeSize >= area.twoShotFromBytes();
}

// One piece as one resident call: publish, read, release.
void runPiece(ResidentArea& area, const Collective& c, const Piece& p, bool twoShots, void* stream) {
  cuda::DeviceRuntime& rt = cuda::runtime();
  const int n = area.size();
  const int me = area.rank();
  const uint64_t sequence = area.beginCall();
  // Publish: nobody still reads this call's slot (last used two calls ago);
  // the input's piece in; said so to each rank.
  for (int r = 0; sequence > 2 && r < n; ++r) {
    if (r != me) rt.waitValue(stream, area.doneBy(me, r), sequence - 2);
  }
  if (c.sendBytes != 0) {
    const size_t bytes = p.count * c.typeSize;
    const std::byte* from = c.send + p.first * c.typeSize;
    const size_t blocks = sendsBlocks(c.kind) ? static_cast<size_t>(n) : 1;
    std::byte* to = area.slot(me, sequence);
    if (c.reduction.op == cpu::ReduceOp::PreMulSum) {  // scaled on the way in, as the host path scales its input
      for (size_t b = 0; b < blocks; ++b) {
        const void* source = from + b * c.blockBytes();
        deviceKernels().reduce(c.type, cpu::ReduceOp::PreMulSum, std::span(&source, 1), to + b * bytes, p.count,
                               c.reduction.scalar, stream);
      }
    } else if (blocks > 1) {  // the piece of each of n blocks, side by side
      rt.copyRows(to, bytes, from, c.blockBytes(), bytes, blocks, stream);
    } else {
      rt.copy(to, from, bytes, stream);
    }
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.writeValue(stream, area.arrivedFrom(r, me), sequence);
  }
  // Read: once every rank's piece is in.
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.waitValue(stream, area.arrivedFrom(me, r), sequence);
  }
  if (twoShots) {
    const PieceOf slot = [&](int r) { return area.slot(r, sequence); };
    readTwoShots(area, c, p.count, c.recv + p.first * c.typeSize, slot, slot, sequence, stream);
  } else {
    const size_t bytes = p.count * c.typeSize;
    read(area, c, p, [&](int r, int b) { return area.slot(r, sequence) + static_cast<size_t>(b) * bytes; }, stream);
  }
  // An average divides the sum, as the host path does (two shots divided
  // each share).
  const bool hasResult = c.kind != CollectiveKind::Reduce || me == c.root;
  if (c.reduction.average && hasResult && !twoShots) {
    deviceKernels().average(c.type, c.recv + p.first * c.typeSize, p.count, n, stream);
  }
  // Release: done reading, told to each owner and to the host's watch.
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.writeValue(stream, area.doneBy(r, me), sequence);
  }
  rt.writeValue(stream, area.finished(), sequence);
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
                  const std::optional<SymmetricWindows::Place>& twoShotsInto, void* stream) {
  cuda::DeviceRuntime& rt = cuda::runtime();
  const int n = area.size();
  const int me = area.rank();
  const uint64_t sequence = area.beginCall(/*readersAtEnd=*/true);
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.writeValue(stream, area.arrivedFrom(r, me), sequence);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.waitValue(stream, area.arrivedFrom(me, r), sequence);
  }
  if (twoShotsInto) {
    // Straight from the windows: the shares are read from every rank's
    // input and copied out of every rank's result, both in windows.
    const auto at = [](const SymmetricWindows::Place& in) {
      return [&in](int r) { return in.window->peers[static_cast<size_t>(r)].base + in.offset; };
    };
    readTwoShots(area, c, c.count, c.recv, at(place), at(*twoShotsInto), sequence, stream);
  } else {
    const Source input = [&](int r, int b) {
      return place.window->peers[static_cast<size_t>(r)].base + place.offset + static_cast<size_t>(b) * c.blockBytes();
    };
    read(area, c, Piece{.first = 0, .count = c.count}, input, stream);
    if (c.reduction.average) deviceKernels().average(c.type, c.recv, c.count, n, stream);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.writeValue(stream, area.doneBy(r, me), sequence);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.waitValue(stream, area.doneBy(me, r), sequence);
  }
  rt.writeValue(stream, area.finished(), sequence);
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
  if (const auto place = windowOf(comm, c)) {
    // Two shots where the result lies in a window too, for the peers to
    // copy the shares out of.
    const auto into = twoShot(area, c) ? comm.windows.find(c.recv, c.recvBytes) : std::nullopt;
    runInWindows(area, c, *place, into, stream);
    queued.fetch_add(1, std::memory_order_relaxed);
    inWindows.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Pieces of at most a slot of input: of a block, or of each of n blocks.
  const size_t blocks = sendsBlocks(c.kind) ? static_cast<size_t>(area.size()) : 1;
  const size_t perPiece = std::max<size_t>(1, area.slotBytes() / blocks / c.typeSize);
  const bool twoShots = twoShot(area, c);
  for (size_t first = 0; first < c.count; first += perPiece) {
    runPiece(area, c, Piece{.first = first, .count = std::min(perPiece, c.count - first)}, twoShots, stream);
  }
  queued.fetch_add(1, std::memory_order_relaxed);
}

uint64_t residentCalls() { return queued.load(std::memory_order_relaxed); }

uint64_t residentCallsInWindows() { return inWindows.load(std::memory_order_relaxed); }

}  // namespace loom::coll
