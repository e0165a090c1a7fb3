#include "collectives/resident_allreduce.hpp"

#include <atomic>
#include <vector>

#include "base/device/runtime.hpp"
#include "base/error.hpp"
#include "collectives/device_kernels.hpp"

namespace loom::coll {
namespace {

std::atomic<uint64_t> queued{0};

bool isDevice(memory::MemoryKind kind) { return kind == memory::MemoryKind::CudaDevice; }

}  // namespace

bool runsResident(const Communicator& comm, const Collective& c) {
  const ResidentArea* area = comm.resident();
  return area != nullptr && c.kind == CollectiveKind::AllReduce && isDevice(c.sendKind) && isDevice(c.recvKind) &&
         c.reduction.op != cpu::ReduceOp::PreMulSum && !c.reduction.average &&
         c.blockBytes() <= area->scratchBytes();
}

void runResident(Communicator& comm, const Collective& c, void* stream) {
  ResidentArea* resident = comm.resident();
  if (resident == nullptr) throw Error(loomInternalError, "a resident all-reduce on a communicator without its area");
  ResidentArea& area = *resident;
  cuda::DeviceRuntime& rt = cuda::runtime();
  const int n = area.size();
  const int me = area.rank();
  const uint64_t sequence = area.beginCall();
  const size_t bytes = c.blockBytes();
  // 1. Nobody still reads this rank's scratch from the last call.
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.waitValue(stream, area.doneBy(me, r), sequence - 1);
  }
  // 2. The input in, then said so to each rank.
  rt.copy(area.scratch(me), c.send, bytes, stream);
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.writeValue(stream, area.arrivedFrom(r, me), sequence);
  }
  // 3. Every rank's input in.
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.waitValue(stream, area.arrivedFrom(me, r), sequence);
  }
  // 4. One pass over every rank's scratch, in rank order.
  std::vector<const void*> sources(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) sources[static_cast<size_t>(r)] = area.scratch(r);
  deviceKernels().reduce(c.type, c.reduction.op, sources, c.recv, c.count, 1.0, stream);
  // 5. Done reading, told to each owner; and to the host's watch (overdue()).
  for (int r = 0; r < n; ++r) {
    if (r != me) rt.writeValue(stream, area.doneBy(r, me), sequence);
  }
  rt.writeValue(stream, area.finished(), sequence);
  queued.fetch_add(1, std::memory_order_relaxed);
}

uint64_t residentCalls() { return queued.load(std::memory_order_relaxed); }

}  // namespace loom::coll
