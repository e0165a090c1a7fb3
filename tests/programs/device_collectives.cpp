// A rank for the device in-place tests: all-reduces, all-gathers,
// reduce-scatters, broadcasts and reduces (root 1) of device buffers (a GPU's where one is visible, else the
// fake device's, whose memory peers map as they would through CUDA IPC), in
// and out of place, checked exactly against what every rank can compute,
// then a line with the bytes that went each way.
//   loom_test_device_collectives COUNT [host-on-rank-0 | refuse-ipc-on-rank-2]
// (refuse-ipc-on-rank-2: on the fake device, rank 2 cannot map its peers' buffers.)
// Values are small integers, so that float32 and bfloat16 sums are exact.
#include <loom/loom.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/device/cuda.hpp"
#include "base/device/staging.hpp"
#include "base/half.hpp"
#include "collectives/device_work.hpp"
#include "tests/support/device_memory.hpp"

namespace {

int32_t valueOf(int rank, size_t i) { return static_cast<int32_t>((rank * 7 + i * 13) % 61) - 30; }

// Element i of `rank`'s input, as `type`, into `out`.
void put(loomDataType_t type, int32_t v, std::byte* out) {
  switch (type) {
    case loomInt32: std::memcpy(out, &v, 4); return;
    case loomFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      return;
    }
    default: {
      const uint16_t b = loom::cpu::floatToBfloat16(static_cast<float>(v));
      std::memcpy(out, &b, 2);
      return;
    }
  }
}

int32_t fold(loomRedOp_t op, int32_t a, int32_t b) { return op == loomSum ? a + b : (a > b ? a : b); }

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };
constexpr int kRoot = 1;  // of broadcast and reduce: not rank 0, which the host-on-rank-0 runs put on the host

// One collective of `count` elements per block, checked; false on a mismatch (said on stdout).
bool runOne(loomComm_t comm, int rank, int n, Coll coll, loomDataType_t type, loomRedOp_t op, bool inPlace,
            size_t count, bool device) {
  const size_t size = type == loomBfloat16 ? 2 : 4;
  const size_t nn = static_cast<size_t>(n);
  const size_t sendCount = coll == Coll::ReduceScatter ? nn * count : count;
  const size_t recvCount = coll == Coll::AllGather ? nn * count : count;
  // In place as NCCL has it: the block of this rank inside the larger buffer.
  const size_t bufferCount = std::max(sendCount, recvCount);
  std::vector<std::byte> input(sendCount * size), expected(recvCount * size);
  for (size_t i = 0; i < sendCount; ++i) put(type, valueOf(rank, i), input.data() + i * size);
  for (size_t i = 0; i < recvCount; ++i) {
    int32_t v = 0;
    if (coll == Coll::AllGather) {
      v = valueOf(static_cast<int>(i / count), i % count);
    } else if (coll == Coll::Broadcast) {
      v = valueOf(kRoot, i);
    } else {
      const size_t at = coll == Coll::ReduceScatter ? static_cast<size_t>(rank) * count + i : i;
      v = valueOf(0, at);
      for (int r = 1; r < n; ++r) v = fold(op, v, valueOf(r, at));
    }
    put(type, v, expected.data() + i * size);
  }
  const size_t blockAt = static_cast<size_t>(rank) * count * size;  // this rank's block in the larger buffer
  std::vector<std::byte> host(bufferCount * size), hostOut(recvCount * size);
  loom::test::DeviceBuffer dbuf(bufferCount * size), dout(recvCount * size);
  std::byte* buffer = device ? dbuf.data() : host.data();
  std::byte* send = buffer;
  std::byte* recv = device ? dout.data() : hostOut.data();
  if (inPlace) {
    recv = buffer;
    if (coll == Coll::AllGather) send = buffer + blockAt;
  }
  std::vector<std::byte> image(bufferCount * size);
  std::memcpy(image.data() + (send - buffer), input.data(), input.size());
  if (device) {
    dbuf.upload(image.data());
  } else {
    host = image;
  }
  loomResult_t result = loomSuccess;
  switch (coll) {
    case Coll::AllReduce: result = loomAllReduce(send, recv, count, type, op, comm, nullptr); break;
    case Coll::AllGather: result = loomAllGather(send, recv, count, type, comm, nullptr); break;
    case Coll::ReduceScatter:
      if (inPlace) recv = buffer + blockAt;
      result = loomReduceScatter(send, recv, count, type, op, comm, nullptr);
      break;
    case Coll::Broadcast: result = loomBroadcast(send, recv, count, type, kRoot, comm, nullptr); break;
    case Coll::Reduce: result = loomReduce(send, recv, count, type, op, kRoot, comm, nullptr); break;
  }
  if (result != loomSuccess) {
    std::printf("rank %d: collective %d failed: %s\n", rank, static_cast<int>(coll), loomGetLastError(comm));
    return false;
  }
  std::vector<std::byte> all(bufferCount * size), output(recvCount * size);
  if (inPlace) {
    if (device) {
      dbuf.download(all.data());
    } else {
      all = host;
    }
    std::memcpy(output.data(), all.data() + (recv - buffer), output.size());
  } else if (device) {
    dout.download(output.data());
  } else {
    output = hostOut;
  }
  // Only the root of a reduce gets a result; a broadcast's root keeps its input.
  if (output == expected || (coll == Coll::Reduce && rank != kRoot)) return true;
  size_t at = 0;
  while (at < recvCount && std::memcmp(&output[at * size], &expected[at * size], size) == 0) ++at;
  std::printf("rank %d: collective %d type %d op %d %s: element %zu of %zu differs\n", rank, static_cast<int>(coll),
              static_cast<int>(type), static_cast<int>(op), inPlace ? "in place" : "out of place", at, recvCount);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const size_t count = std::strtoull(argv[1], nullptr, 10);
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool hostOnRank0 = mode == "host-on-rank-0";
  loom::test::deviceMemoryKind();
  loomComm_t comm = nullptr;
  if (loomCommInitFromEnv(&comm, nullptr) != loomSuccess) {
    std::printf("init failed: %s\n", loomGetLastError(nullptr));
    return 1;
  }
  int rank = -1, n = -1;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &n);
  const bool device = !(hostOnRank0 && rank == 0);
  if (mode == "refuse-ipc-on-rank-2" && rank == 2) loom::cuda::fakeRefuseIpc(true);
  const uint64_t stagedBefore = loom::cuda::fakeBytesStaged();
  const uint64_t inPlaceBefore = loom::coll::fakeDeviceBytesInPlace();
  int failures = 0;
  for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce}) {
    for (loomDataType_t type : {loomFloat32, loomInt32, loomBfloat16}) {
      for (loomRedOp_t op : {loomSum, loomMax}) {
        if ((coll == Coll::AllGather || coll == Coll::Broadcast) && op != loomSum) continue;
        for (bool inPlace : {false, true}) {
          if (!runOne(comm, rank, n, coll, type, op, inPlace, count, device)) ++failures;
        }
      }
    }
  }
  std::printf("rank %d of %d (%s): in place %llu bytes, staged %llu bytes\n", rank, n, device ? "device" : "host",
              static_cast<unsigned long long>(loom::coll::fakeDeviceBytesInPlace() - inPlaceBefore),
              static_cast<unsigned long long>(loom::cuda::fakeBytesStaged() - stagedBefore));
  if (failures == 0) std::printf("rank %d: collectives ok\n", rank);
  return loomCommDestroy(comm) == loomSuccess && failures == 0 ? 0 : 1;
}
