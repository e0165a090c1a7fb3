// A rank for the device in-place tests: all-reduces of device buffers (a
// GPU's where one is visible, else the fake device's, whose memory peers map
// as they would through CUDA IPC), checked exactly against what every rank
// can compute, then a line with the bytes that went each way.
//   loom_test_device_allreduce COUNT [host-on-rank-0]
// Values are small integers, so that float32 and bfloat16 sums are exact.
#include <loom/loom.h>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const size_t count = std::strtoull(argv[1], nullptr, 10);
  const bool hostOnRank0 = argc > 2 && std::string(argv[2]) == "host-on-rank-0";
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
  const uint64_t stagedBefore = loom::cuda::fakeBytesStaged();
  const uint64_t inPlaceBefore = loom::coll::fakeDeviceBytesInPlace();
  int failures = 0;
  for (loomDataType_t type : {loomFloat32, loomInt32, loomBfloat16}) {
    const size_t size = type == loomBfloat16 ? 2 : 4;
    for (loomRedOp_t op : {loomSum, loomMax}) {
      for (bool inPlace : {false, true}) {
        std::vector<std::byte> input(count * size), expected(count * size), output(count * size);
        for (size_t i = 0; i < count; ++i) {
          int32_t v = valueOf(0, i);
          for (int r = 1; r < n; ++r) v = fold(op, v, valueOf(r, i));
          put(type, valueOf(rank, i), input.data() + i * size);
          put(type, v, expected.data() + i * size);
        }
        loom::test::DeviceBuffer dsend(count * size), drecv(count * size);
        void* send = device ? static_cast<void*>(dsend.data()) : input.data();
        void* recv = inPlace ? send : (device ? static_cast<void*>(drecv.data()) : output.data());
        if (device) dsend.upload(input.data());
        if (loomAllReduce(send, recv, count, type, op, comm, nullptr) != loomSuccess) {
          std::printf("rank %d: all-reduce failed: %s\n", rank, loomGetLastError(comm));
          return 1;
        }
        if (device) {
          (inPlace ? dsend : drecv).download(output.data());
        } else if (inPlace) {
          output = input;
        }
        if (output != expected) {
          size_t at = 0;
          while (at < count && std::memcmp(&output[at * size], &expected[at * size], size) == 0) ++at;
          std::printf("rank %d: type %d op %d %s: element %zu of %zu differs\n", rank, static_cast<int>(type),
                      static_cast<int>(op), inPlace ? "in place" : "out of place", at, count);
          ++failures;
        }
      }
    }
  }
  std::printf("rank %d of %d (%s): in place %llu bytes, staged %llu bytes\n", rank, n, device ? "device" : "host",
              static_cast<unsigned long long>(loom::coll::fakeDeviceBytesInPlace() - inPlaceBefore),
              static_cast<unsigned long long>(loom::cuda::fakeBytesStaged() - stagedBefore));
  if (failures == 0) std::printf("rank %d: all-reduces ok\n", rank);
  return loomCommDestroy(comm) == loomSuccess && failures == 0 ? 0 : 1;
}
