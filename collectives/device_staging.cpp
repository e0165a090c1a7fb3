#include "collectives/device_staging.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "base/counters.hpp"
#include "base/device/staging.hpp"

namespace loom::coll {
namespace {

using memory::MemoryKind;

// Where a buffer's piece k lies. Flat: bytes [k P, k P + m) of the buffer
// (the one block of an element-wise call, all-gather's and gather's input,
// reduce-scatter's and scatter's output). Blocks: those bytes of each of the
// call's n blocks, which the piece's call sees side by side, n rows of m, so
// its stand-in holds the pieces one after another, piece k n k P bytes in.
enum class PieceLayout { Flat, Blocks };

PieceLayout sendLayout(CollectiveKind kind) {
  return kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AlltoAll || kind == CollectiveKind::Scatter
             ? PieceLayout::Blocks
             : PieceLayout::Flat;
}

PieceLayout recvLayout(CollectiveKind kind) {
  return kind == CollectiveKind::AllGather || kind == CollectiveKind::AlltoAll || kind == CollectiveKind::Gather
             ? PieceLayout::Blocks
             : PieceLayout::Flat;
}

// The pieces of a call: P bytes of each block of C, on n ranks.
struct Geometry {
  size_t pieceBytes;
  size_t blockBytes;
  size_t ranks;

  size_t count() const { return (blockBytes + pieceBytes - 1) / pieceBytes; }
  size_t bytes(size_t k) const { return std::min(pieceBytes, blockBytes - k * pieceBytes); }
};

// Piece k's rows in a buffer laid as `layout` and in its stand-in.
struct Rows {
  size_t originalAt;  // the first row's offset
  size_t standInAt;
  size_t originalPitch;
  size_t standInPitch;
  size_t rowBytes;
  size_t rows;
};

Rows rowsOf(const Geometry& g, PieceLayout layout, size_t k) {
  const size_t at = k * g.pieceBytes;
  const size_t m = g.bytes(k);
  if (layout == PieceLayout::Flat) return {at, at, m, m, m, 1};
  return {at, g.ranks * at, g.blockBytes, m, m, g.ranks};
}

// Whether a staged call runs whole or in pieces (runInPieces).
enum class Runs { Whole, InPieces };

// A call's stand-ins for its buffers: `c` with them swapped in, and the
// buffers they stand for. Device buffers stand in pinned memory leased from
// the call's StagedCopies, copied on its stream; in a call run in pieces, a
// host buffer in blocks stands in host memory, copied by this thread. In
// place (one device pointer for both, laid alike), one pinned buffer serves
// as both.
struct Staged {
  Collective c;
  const std::byte* deviceSend = nullptr;  // null: the send buffer is not staged
  std::byte* deviceRecv = nullptr;        // null: the receive buffer is not staged
  const std::byte* hostSend = nullptr;    // null: no host stand-in for the send buffer
  std::byte* hostRecv = nullptr;
  std::byte* in = nullptr;  // the pinned stand-ins
  std::byte* out = nullptr;
  std::unique_ptr<std::byte[]> hostIn;
  std::unique_ptr<std::byte[]> hostOut;

  // In pieces, the call's buffers in blocks need stand-ins even in host memory. `staging` may be null where no buffer is
  // a device's.
  Staged(cuda::StagedCopies* staging, Collective call, Runs runs) : c(call) {
    const bool inPieces = runs == Runs::InPieces;
    const bool sendInBlocks = inPieces && sendLayout(c.kind) == PieceLayout::Blocks;
    const bool recvInBlocks = inPieces && recvLayout(c.kind) == PieceLayout::Blocks;
    const bool stageSend = c.sendKind == MemoryKind::CudaDevice;
    const bool stageRecv = c.recvKind == MemoryKind::CudaDevice;
    const bool shared = stageSend && stageRecv && c.send == c.recv && sendInBlocks == recvInBlocks;
    if (stageSend) {
      deviceSend = c.send;
      in = staging->lease(shared ? std::max(c.sendBytes, c.recvBytes) : c.sendBytes);
      c.send = in;
      c.sendKind = MemoryKind::CudaHostPinned;
    } else if (sendInBlocks && c.sendBytes != 0) {
      hostSend = c.send;
      hostIn = std::make_unique_for_overwrite<std::byte[]>(c.sendBytes);
      c.send = hostIn.get();
    }
    if (stageRecv) {
      deviceRecv = c.recv;
      if (!shared) out = staging->lease(c.recvBytes);
      c.recv = shared ? in : out;
      c.recvKind = MemoryKind::CudaHostPinned;
    } else if (recvInBlocks && c.recvBytes != 0) {
      hostRecv = c.recv;
      hostOut = std::make_unique_for_overwrite<std::byte[]>(c.recvBytes);
      c.recv = hostOut.get();
    }
  }
};

// Piece k of `c`, whose buffers are stand-ins (or flat host buffers, their
// own): the same call on rows of m bytes of each block it has.
Collective pieceOf(const Collective& c, const Geometry& g, size_t k) {
  Collective p = c;
  p.count = g.bytes(k) / c.typeSize;
  if (c.sendBytes != 0) {
    const Rows rows = rowsOf(g, sendLayout(c.kind), k);
    p.send += rows.standInAt;
    p.sendBytes = rows.rowBytes * rows.rows;
  }
  if (c.recvBytes != 0) {
    const Rows rows = rowsOf(g, recvLayout(c.kind), k);
    p.recv += rows.standInAt;
    p.recvBytes = rows.rowBytes * rows.rows;
  }
  return p;
}

// Host rows, by this thread.
void copyHostRows(std::byte* dst, size_t dstPitch, const std::byte* src, size_t srcPitch, size_t rowBytes,
                  size_t rows) {
  for (size_t i = 0; i < rows; ++i) std::memcpy(dst + i * dstPitch, src + i * srcPitch, rowBytes);
}

// Runs `body` on `c` with its device buffers swapped for pinned stand-ins
// (and, in pieces, its host buffers in blocks for host ones), its copies on
// the communicator's copy stream after the work queued before the call; if
// it throws, StagedCopies drains the copies it queued before the stand-ins go.
using StagedBody = std::function<void(Staged&, cuda::DeviceStream&, const std::function<void()>& check)>;
void withStaged(Communicator& comm, const Collective& c, Runs runs, const StagedBody& body) {
  cuda::StagedCopies staging(comm.staging, comm.deviceWaitCheck());
  Staged staged(&staging, c, runs);
  cuda::DeviceStream& copies = staging.stream();
  if (!cuda::onUserStream()) copies.afterDefaultStream();
  body(staged, copies, staging.check());
}

// The pieces of a call whose stand-ins are `staged`, in turn: every device
// piece's copy in queued at once, each with a mark; the copies back queue
// behind them and run while the later pieces cross the network. Host
// stand-ins are filled and emptied by this thread around their piece.
// `copies` is null where no buffer is a device's.
void runPieces(Staged& staged, const Geometry& g, cuda::DeviceStream* copies, const std::function<void()>& check,
               const std::function<void(const Collective&)>& run) {
  const PieceLayout sendAs = sendLayout(staged.c.kind);
  const PieceLayout recvAs = recvLayout(staged.c.kind);
  const size_t count = g.count();
  std::vector<cuda::CopyMark> arrived(staged.deviceSend != nullptr ? count : 0);
  for (size_t k = 0; k < arrived.size(); ++k) {
    const Rows r = rowsOf(g, sendAs, k);
    copies->copyRows(staged.in + r.standInAt, r.standInPitch, staged.deviceSend + r.originalAt,
                     r.originalPitch, r.rowBytes, r.rows);
    arrived[k] = copies->mark();
  }
  for (size_t k = 0; k < count; ++k) {
    if (!arrived.empty()) arrived[k].wait(check);
    if (staged.hostSend != nullptr) {
      const Rows r = rowsOf(g, sendAs, k);
      copyHostRows(staged.hostIn.get() + r.standInAt, r.standInPitch, staged.hostSend + r.originalAt,
                   r.originalPitch, r.rowBytes, r.rows);
    }
    const Collective piece = pieceOf(staged.c, g, k);
    run(piece);
    if (piece.recvBytes == 0) continue;
    const Rows r = rowsOf(g, recvAs, k);
    if (staged.deviceRecv != nullptr) {
      copies->copyRows(staged.deviceRecv + r.originalAt, r.originalPitch, piece.recv, r.standInPitch, r.rowBytes,
                       r.rows);
    } else if (staged.hostRecv != nullptr) {
      copyHostRows(staged.hostRecv + r.originalAt, r.originalPitch, piece.recv, r.standInPitch, r.rowBytes, r.rows);
    }
  }
  if (copies != nullptr) copies->synchronize(check);
}

}  // namespace

void runStaged(Communicator& comm, Collective c, const std::function<void(const Collective&)>& run) {
  withStaged(comm, c, Runs::Whole, [&](Staged& staged, cuda::DeviceStream& copies, const std::function<void()>& check) {
    if (staged.deviceSend != nullptr) copies.copy(staged.in, staged.deviceSend, c.sendBytes);
    copies.synchronize(check);
    run(staged.c);
    if (staged.deviceRecv != nullptr && c.recvBytes != 0) {
      copies.copy(staged.deviceRecv, staged.c.recv, c.recvBytes);
      copies.synchronize(check);
    }
  });
}

size_t pieceBytesFor(const Collective& c, size_t pieceBytes, int ranks) {
  const bool inBlocks = sendLayout(c.kind) == PieceLayout::Blocks || recvLayout(c.kind) == PieceLayout::Blocks;
  if (inBlocks && ranks > 1) pieceBytes /= static_cast<size_t>(ranks);
  pieceBytes -= pieceBytes % 64;  // a whole number of elements of every type, aligned as a cache line
  return pieceBytes != 0 && c.blockBytes() > pieceBytes ? pieceBytes : 0;
}

void runInPieces(Communicator& comm, const Collective& c, size_t pieceBytes,
                 const std::function<void(const Collective&)>& run) {
  const Geometry g{pieceBytes, c.blockBytes(), static_cast<size_t>(comm.size())};
  counters::add(counters::Counter::StagedPieces, g.count());
  if (!touchesDevice(c)) {  // no copy stream: a host rank may have no CUDA at all
    Staged onHost(nullptr, c, Runs::InPieces);
    runPieces(onHost, g, nullptr, [] {}, run);
    return;
  }
  withStaged(comm, c, Runs::InPieces, [&](Staged& staged, cuda::DeviceStream& copies, const std::function<void()>& check) {
    runPieces(staged, g, &copies, check, run);
  });
}

}  // namespace loom::coll
