#include "collectives/resident_collectives.hpp"

#include <atomic>
#include <vector>

#include "base/device/runtime.hpp"
#include "base/error.hpp"
#include "collectives/device_kernels.hpp"

namespace loom::coll {
namespace {

std::atomic<uint64_t> queued{0};

bool onDevice(memory::MemoryKind kind, size_t bytes) {
  return bytes == 0 || kind == memory::MemoryKind::CudaDevice;
}

// The most bytes any rank publishes for `c` on `n` ranks: the same on every rank.
size_t largestInput(const Collective& c, int n) {
  switch (c.kind) {
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AlltoAll:
    case CollectiveKind::Scatter: return c.blockBytes() * static_cast<size_t>(n);
    default: return c.blockBytes();
  }
}

// The read step of `c` for rank `me`: from every rank's scratch, queued on `stream`.
void read(const ResidentArea& area, const Collective& c, void* stream) {
  DeviceKernels& kernels = deviceKernels();
  const int n = area.size();
  const int me = area.rank();
  const size_t block = c.blockBytes();
  const auto at = [block](int r) { return static_cast<size_t>(r) * block; };
  // Every rank's scratch, `offset` bytes in, in rank order.
  const auto all = [&](size_t offset) {
    std::vector<const void*> sources(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) sources[static_cast<size_t>(r)] = area.scratch(r) + offset;
    return sources;
  };
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      kernels.reduce(c.type, c.reduction.op, all(0), c.recv, c.count, 1.0, stream);
      break;
    case CollectiveKind::Reduce:
      if (me == c.root) kernels.reduce(c.type, c.reduction.op, all(0), c.recv, c.count, 1.0, stream);
      break;
    case CollectiveKind::ReduceScatter:
      kernels.reduce(c.type, c.reduction.op, all(at(me)), c.recv, c.count, 1.0, stream);
      break;
    case CollectiveKind::AllGather:
      for (int r = 0; r < n; ++r) kernels.copy(c.recv + at(r), area.scratch(r), block, stream);
      break;
    case CollectiveKind::Broadcast:
      kernels.copy(c.recv, area.scratch(c.root), block, stream);
      break;
    case CollectiveKind::AlltoAll:
      for (int r = 0; r < n; ++r) kernels.copy(c.recv + at(r), area.scratch(r) + at(me), block, stream);
      break;
    case CollectiveKind::Gather:
      if (me != c.root) break;
      for (int r = 0; r < n; ++r) kernels.copy(c.recv + at(r), area.scratch(r), block, stream);
      break;
    case CollectiveKind::Scatter:
      kernels.copy(c.recv, area.scratch(c.root) + at(me), block, stream);
      break;
  }
}

}  // namespace

bool runsResident(const Communicator& comm, const Collective& c) {
  const ResidentArea* area = comm.resident();
  return area != nullptr && onDevice(c.sendKind, c.sendBytes) && onDevice(c.recvKind, c.recvBytes) &&
         c.reduction.op != cpu::ReduceOp::PreMulSum && !c.reduction.average &&
         largestInput(c, area->size()) <= area->scratchBytes();
}

void runResident(Communicator& comm, const Collective& c, void* stream) {
  ResidentArea* resident = comm.resident();
  if (resident == nullptr) throw Error(loomInternalError, "a resident collective on a communicator without its area");
  ResidentArea& area = *resident;
  cuda::DeviceRuntime& rt = cuda::runtime();
  const int n = area.size();
  const int me = area.rank();
  const uint64_t sequence = area.beginCall();
  // Publish: nobody still reads this rank's scratch from the last call; the
  // input in; said so to each rank.
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.waitValue(stream, area.doneBy(me, r), sequence - 1);
  }
  rt.copy(area.scratch(me), c.send, c.sendBytes, stream);
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.writeValue(stream, area.arrivedFrom(r, me), sequence);
  }
  // Read: once every rank's input is in.
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.waitValue(stream, area.arrivedFrom(me, r), sequence);
  }
  read(area, c, stream);
  // Release: done reading, told to each owner and to the host's watch.
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.writeValue(stream, area.doneBy(r, me), sequence);
  }
  rt.writeValue(stream, area.finished(), sequence);
  queued.fetch_add(1, std::memory_order_relaxed);
}

uint64_t residentCalls() { return queued.load(std::memory_order_relaxed); }

}  // namespace loom::coll
