#include "collectives/device_staging.hpp"

#include <algorithm>
#include <atomic>
#include <optional>
#include <vector>

#include "base/device/staging.hpp"

namespace loom::coll {
namespace {

using memory::MemoryKind;

std::atomic<uint64_t> pieces{0};

// A call's pinned stand-ins for its device buffers: `c` with them swapped
// in, and the device buffers it stands for. In place (one pointer for both),
// one pinned buffer serves as both.
struct Staged {
  Collective c;
  const std::byte* deviceSend = nullptr;  // null: the send buffer is not staged
  std::byte* deviceRecv = nullptr;        // null: the receive buffer is not staged
  std::optional<cuda::StagingArea::Lease> in;
  std::optional<cuda::StagingArea::Lease> out;

  Staged(cuda::StagingArea& area, Collective call) : c(call) {
    const bool stageSend = c.sendKind == MemoryKind::CudaDevice;
    const bool stageRecv = c.recvKind == MemoryKind::CudaDevice;
    const bool shared = stageSend && stageRecv && c.send == c.recv;
    if (stageSend) {
      deviceSend = c.send;
      in.emplace(area.lease(shared ? std::max(c.sendBytes, c.recvBytes) : c.sendBytes));
      c.send = in->data();
      c.sendKind = MemoryKind::CudaHostPinned;
    }
    if (stageRecv) {
      deviceRecv = c.recv;
      if (!shared) out.emplace(area.lease(c.recvBytes));
      c.recv = shared ? in->data() : out->data();
      c.recvKind = MemoryKind::CudaHostPinned;
    }
  }

  // After a failure with copies maybe still queued: waits for them, or, if
  // that wait gives up too, keeps the pinned buffers from ever being lent
  // again while a copy may still write into them.
  void drain(cuda::DeviceStream& copies, const std::function<void()>& check) noexcept {
    try {
      copies.synchronize(check);
    } catch (...) {
      if (in) in->abandon();
      if (out) out->abandon();
    }
  }
};

// Piece k of `c`, pieces of `pieceBytes`: elements [k pieceBytes, ...) of
// each buffer this rank uses (a buffer it ignores stays as it is).
Collective pieceOf(const Collective& c, size_t pieceBytes, size_t k) {
  Collective p = c;
  const size_t at = k * pieceBytes;
  const size_t bytes = std::min(pieceBytes, c.blockBytes() - at);
  p.count = bytes / c.typeSize;
  if (c.sendBytes != 0) p.send += at, p.sendBytes = bytes;
  if (c.recvBytes != 0) p.recv += at, p.recvBytes = bytes;
  return p;
}

// Runs `body` on `c` with its device buffers swapped for pinned stand-ins,
// its copies on the communicator's copy stream after the work queued before
// the call; if it throws, the copies it queued are drained first.
using StagedBody = std::function<void(Staged&, cuda::DeviceStream&, const std::function<void()>& check)>;
void withStaged(Communicator& comm, const Collective& c, const StagedBody& body) {
  cuda::StagingArea& area = comm.staging;
  cuda::DeviceStream& copies = area.stream();
  const auto check = comm.deviceWaitCheck();
  Staged staged(area, c);
  try {
    if (!cuda::onUserStream()) copies.afterDefaultStream();
    body(staged, copies, check);
  } catch (...) {
    staged.drain(copies, check);
    throw;
  }
}

}  // namespace

bool touchesDevice(const Collective& c) {
  return c.sendKind == MemoryKind::CudaDevice || c.recvKind == MemoryKind::CudaDevice;
}

void runStaged(Communicator& comm, Collective c, const std::function<void(const Collective&)>& run) {
  withStaged(comm, c, [&](Staged& staged, cuda::DeviceStream& copies, const std::function<void()>& check) {
    if (staged.deviceSend != nullptr) copies.copy(staged.in->data(), staged.deviceSend, c.sendBytes);
    copies.synchronize(check);
    run(staged.c);
    if (staged.deviceRecv != nullptr && c.recvBytes != 0) {
      copies.copy(staged.deviceRecv, staged.c.recv, c.recvBytes);
      copies.synchronize(check);
    }
  });
}

size_t pieceBytesFor(const Collective& c, size_t pieceBytes) {
  const bool elementWise = c.kind == CollectiveKind::AllReduce || c.kind == CollectiveKind::Broadcast ||
                           c.kind == CollectiveKind::Reduce;
  pieceBytes -= pieceBytes % 64;  // a whole number of elements of every type, aligned as a cache line
  return elementWise && pieceBytes != 0 && c.blockBytes() > pieceBytes ? pieceBytes : 0;
}

void runInPieces(Communicator& comm, const Collective& c, size_t pieceBytes,
                 const std::function<void(const Collective&)>& run) {
  const size_t count = (c.blockBytes() + pieceBytes - 1) / pieceBytes;
  pieces.fetch_add(count, std::memory_order_relaxed);
  if (!touchesDevice(c)) {
    for (size_t k = 0; k < count; ++k) run(pieceOf(c, pieceBytes, k));
    return;
  }
  withStaged(comm, c, [&](Staged& staged, cuda::DeviceStream& copies, const std::function<void()>& check) {
    // Every piece's copy in, queued at once, each with a mark; the copies
    // back queue behind them and run while the later pieces cross the network.
    std::vector<cuda::CopyMark> arrived(count);
    for (size_t k = 0; k < count; ++k) {
      if (staged.deviceSend != nullptr) {
        copies.copy(staged.in->data() + k * pieceBytes, staged.deviceSend + k * pieceBytes,
                    pieceOf(c, pieceBytes, k).sendBytes);
      }
      arrived[k] = copies.mark();
    }
    for (size_t k = 0; k < count; ++k) {
      arrived[k].wait(check);
      const Collective piece = pieceOf(staged.c, pieceBytes, k);
      run(piece);
      if (staged.deviceRecv != nullptr && piece.recvBytes != 0) {
        copies.copy(staged.deviceRecv + k * pieceBytes, piece.recv, piece.recvBytes);
      }
    }
    copies.synchronize(check);
  });
}

uint64_t piecesRun() { return pieces.load(std::memory_order_relaxed); }

}  // namespace loom::coll
