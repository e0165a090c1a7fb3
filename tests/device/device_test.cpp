// The staged device path's host side, on a CUDA device where one is visible
// and on the fake device elsewhere (support/device_memory.hpp): sends and
// receives of device memory, in groups and mixed with host memory (by handle
// between ranks of one node, comm/engine/by_handle.cpp; else staged), a
// PreMulSum scalar that lives on the device, the staging area's reuse of its
// pinned buffers, and what a stream that is no stream gets. The collectives:
// CollectivesOnDeviceMemory (collectives_test); the GPU's own checks: gpu_test.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <cstring>
#include <functional>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "base/device/cuda.hpp"
#include "base/device/fake_device.hpp"
#include "base/device/peer_access.hpp"
#include "base/device/staging.hpp"
#include "tests/support/counters.hpp"
#include "tests/support/device_memory.hpp"
#include "tests/support/pattern.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/transports.hpp"

using loom::test::DeviceBuffer;
using loom::test::firstMismatch;
using loom::test::fillPattern;
using loom::test::messageSeed;
using loom::test::onThreads;

namespace {

// Each of n ranks sends `bytes` to the next and receives from the previous,
// in one group; even ranks' buffers on the device, odd ranks' on the host
// when `mixed`.
void ringOfSends(int n, size_t bytes, bool mixed) {
  auto comms = loom::test::initThreadComms(n);
  onThreads(n, [&](int r) {
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    std::vector<std::byte> out(bytes), in(bytes);
    fillPattern(out, messageSeed(r, next, bytes));
    const bool device = !mixed || r % 2 == 0;
    DeviceBuffer dout(bytes), din(bytes);
    dout.upload(out.data());
    void* sendbuff = device ? static_cast<void*>(dout.data()) : out.data();
    void* recvbuff = device ? static_cast<void*>(din.data()) : in.data();
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomSend(sendbuff, bytes, loomUint8, next, comms[r], nullptr), loomSuccess);
    ASSERT_EQ(loomRecv(recvbuff, bytes, loomUint8, prev, comms[r], nullptr), loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
    if (device) din.download(in.data());
    EXPECT_EQ(firstMismatch(in, messageSeed(prev, r, bytes)), -1)
        << "rank " << r << " of " << n << ", " << bytes << " bytes, " << (device ? "device" : "host");
  });
  loom::test::destroyAll(comms);
}

bool fake() { return std::string(loom::test::deviceMemoryKind()) == "fake"; }

// What a ring of sends moved by each path: bytes staged through pinned
// memory (fake device memory is host memory too, so only its copies' count
// shows the path) and bytes that receives copied by handle.
struct Moved {
  uint64_t staged;
  uint64_t byHandle;
  uint64_t copied;  // by other copies on a stream
};
Moved movedBy(int n, size_t bytes, bool mixed) {
  const uint64_t staged = loom::cuda::fakeBytesStaged();
  const uint64_t byHandle = loom::test::counter("bytes_taken_by_handle");
  const uint64_t copied = loom::cuda::fakeBytesCopied();
  ringOfSends(n, bytes, mixed);
  return {loom::cuda::fakeBytesStaged() - staged, loom::test::counter("bytes_taken_by_handle") - byHandle,
          loom::cuda::fakeBytesCopied() - copied};
}

// The connection's FIFO (LOOM_BUFFSIZE's default): larger messages go by handle.
constexpr size_t kFifoBytes = size_t{4} << 20;

TEST(DeviceP2p, SendsAndReceivesOfDeviceMemoryArriveExactly) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  for (int n : {2, 3}) {
    for (size_t bytes : {size_t{1}, size_t{4097}, (size_t{1} << 20) + 3, kFifoBytes, kFifoBytes + 3}) {
      const Moved moved = movedBy(n, bytes, false);
      const uint64_t all = bytes * static_cast<size_t>(n);
      // Within the FIFO staged (every send's copy in, every receive's out), past it by handle.
      EXPECT_EQ(moved.byHandle, bytes > kFifoBytes ? all : 0u) << n << " ranks, " << bytes << " bytes";
      if (fake()) {
        EXPECT_EQ(moved.staged, bytes > kFifoBytes ? 0u : 2 * all) << n << " ranks, " << bytes << " bytes";
      }
    }
  }
}

// A rank's send to itself and its receive from itself in one group are one
// copy on the device: exact, the bytes copied once, never staged through
// pinned memory (which takes each byte twice) nor by handle (group.cpp's
// copyToSelf).
TEST(DeviceP2p, ASendToItselfIsOneCopyOnTheDevice) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  for (size_t bytes : {size_t{1}, size_t{4097}, kFifoBytes + 3}) {
    const Moved moved = movedBy(1, bytes, false);
    EXPECT_EQ(moved.byHandle, 0u) << bytes << " bytes";
    if (fake()) {
      EXPECT_EQ(moved.staged, 0u) << bytes << " bytes";
      EXPECT_EQ(moved.copied, bytes) << bytes << " bytes";
    }
  }
}

TEST(DeviceP2p, DeviceAndHostMemoryMixAcrossRanks) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  for (size_t bytes : {size_t{7}, kFifoBytes + 3}) {
    // Ranks 0 and 2 on the device. Past the FIFO, 0 to 1 and 2 to 0 go by
    // handle (to host memory, and to device memory); 1 to 2 comes as bytes,
    // staged at 2. Within it, ranks 0 and 2 stage both ways.
    const Moved moved = movedBy(3, bytes, true);
    EXPECT_EQ(moved.byHandle, bytes > kFifoBytes ? 2 * bytes : 0u);
    if (fake()) {
      EXPECT_EQ(moved.staged, bytes > kFifoBytes ? bytes : 4 * bytes);
    }
  }
}

// A message within the FIFO leaves the sender before the receiver posts, on
// the device too: two ranks that each send before they receive, unGrouped.
TEST(DeviceP2p, ASendWithinTheFifoDoesNotWaitForItsReceiver) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  auto comms = loom::test::initThreadComms(2);
  onThreads(2, [&](int r) {
    const size_t bytes = kFifoBytes;
    std::vector<std::byte> out(bytes), in(bytes);
    fillPattern(out, messageSeed(r, 1 - r, bytes));
    DeviceBuffer dout(bytes), din(bytes);
    dout.upload(out.data());
    ASSERT_EQ(loomSend(dout.data(), bytes, loomUint8, 1 - r, comms[r], nullptr), loomSuccess)
        << loomGetLastError(comms[r]);
    ASSERT_EQ(loomRecv(din.data(), bytes, loomUint8, 1 - r, comms[r], nullptr), loomSuccess)
        << loomGetLastError(comms[r]);
    din.download(in.data());
    EXPECT_EQ(firstMismatch(in, messageSeed(1 - r, r, bytes)), -1) << "rank " << r;
  });
  loom::test::destroyAll(comms);
}

// A sender that gives up on a message by handle (here an abort while its
// receiver has not posted) withdraws it: the receiver, posting later, fails
// naming it instead of reading a buffer whose owner may have freed it.
TEST(DeviceP2p, AWithdrawnHandleIsNotRead) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  loom::test::ScopedEnv timeout("LOOM_TIMEOUT_MS", "20000");
  // No heartbeats: the receive meets the withdrawn handle before it hears that rank 0 is gone.
  loom::test::ScopedEnv heartbeats("LOOM_HEARTBEAT_MS", "0");
  auto comms = loom::test::initThreadComms(2);
  const size_t bytes = kFifoBytes + 3;
  std::vector<std::byte> message(bytes), untouched(bytes, std::byte{0x5a}), got(bytes);
  fillPattern(message, messageSeed(0, 1, bytes));
  DeviceBuffer src(bytes), dst(bytes);
  src.upload(message.data());
  dst.upload(untouched.data());
  loomResult_t sent = loomSuccess;
  std::thread sender([&] { sent = loomSend(src.data(), bytes, loomUint8, 1, comms[0], nullptr); });
  EXPECT_EQ(loom::test::abortOnceInside(comms[0]), loomSuccess);
  sender.join();
  EXPECT_NE(sent, loomSuccess);
  const loomResult_t received = loomRecv(dst.data(), bytes, loomUint8, 0, comms[1], nullptr);
  EXPECT_EQ(received, loomRemoteError);
  EXPECT_NE(std::string(loomGetLastError(comms[1])).find("rank 0"), std::string::npos) << loomGetLastError(comms[1]);
  dst.download(got.data());
  EXPECT_EQ(got, untouched);
  loomCommAbort(comms[1]);
}

// Where messages cannot go by handle, device memory is staged: with
// LOOM_SHM_SINGLE_COPY=0, and over sockets.
TEST(DeviceP2p, SingleCopyOffAndSocketsStageDeviceMemory) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  const size_t bytes = kFifoBytes + 3;
  {
    loom::test::ScopedEnv off("LOOM_SHM_SINGLE_COPY", "0");
    const Moved moved = movedBy(3, bytes, false);
    EXPECT_EQ(moved.byHandle, 0u);
    if (fake()) {
      EXPECT_EQ(moved.staged, 2 * bytes * 3);  // every send's copy in, every receive's out
    }
  }
  loom::test::TransportScope sockets("socket");
  const Moved moved = movedBy(2, bytes, false);
  EXPECT_EQ(moved.byHandle, 0u);
  if (fake()) {
    EXPECT_EQ(moved.staged, 2 * bytes * 2);
  }
}

// loomScalarDevice with the scalar in device memory: read through a copy, never dereferenced on the host.
TEST(DevicePreMulSum, AScalarInDeviceMemoryIsReadFromTheDevice) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  auto comms = loom::test::initThreadComms(2);
  onThreads(2, [&](int r) {
    const float factor = r == 0 ? 2.0f : 3.0f;
    DeviceBuffer scalar(sizeof factor), data(4 * sizeof(float));
    scalar.upload(&factor);
    const std::vector<float> input{1, 2, 3, 4};
    data.upload(input.data());
    loomRedOp_t op;
    ASSERT_EQ(loomRedOpCreatePreMulSum(&op, scalar.data(), loomFloat32, loomScalarDevice, comms[r]), loomSuccess)
        << loomGetLastError(comms[r]);
    ASSERT_EQ(loomAllReduce(data.data(), data.data(), 4, loomFloat32, op, comms[r], nullptr), loomSuccess)
        << loomGetLastError(comms[r]);
    std::vector<float> out(4);
    data.download(out.data());
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(out[i], 5.0f * input[i]) << "element " << i;  // 2x + 3x
    loomRedOpDestroy(op, comms[r]);
  });
  loom::test::destroyAll(comms);
}

// LOOM_DETERMINISTIC=1: a float32 sum of device buffers has the bits of the
// same sum of host buffers (values whose sum depends on the order).
TEST(DeviceDeterminism, Float32SumsOfDeviceBuffersHaveTheHostsBits) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  loom::test::ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  constexpr int n = 3;
  constexpr size_t count = 300007;
  auto comms = loom::test::initThreadComms(n);
  onThreads(n, [&](int r) {
    std::vector<float> input(count);
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(r + 1);
    for (float& v : input) {  // magnitudes from 1e-4 to 1e4: rounding depends on the order
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = static_cast<float>(static_cast<double>(x % 20001) - 10000.0) * (x % 3 == 0 ? 1e-8f : 1.0f);
    }
    std::vector<float> host(count), fromDevice(count);
    ASSERT_EQ(loomAllReduce(input.data(), host.data(), count, loomFloat32, loomSum, comms[r], nullptr), loomSuccess);
    DeviceBuffer in(count * 4), out(count * 4);
    in.upload(input.data());
    ASSERT_EQ(loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comms[r], nullptr), loomSuccess)
        << loomGetLastError(comms[r]);
    out.download(fromDevice.data());
    EXPECT_EQ(std::memcmp(host.data(), fromDevice.data(), count * 4), 0) << "rank " << r;
  });
  loom::test::destroyAll(comms);
}

// Large element-wise calls of a job with GPUs (the fake device stands in
// where there is none) run as pieces where their algorithm stages device
// buffers (collectives/device_staging.hpp): every element lands where it
// belongs, the last, shorter piece's too, with device and host buffers mixed
// across ranks, in and out of place, for all-reduce (sum and average),
// broadcast and reduce.
TEST(DevicePieces, ElementWiseCallsRunInPiecesAndAreExact) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  loom::test::ScopedEnv ring("LOOM_ALGO", "ring");  // not the shared segment's in-place reads: staged
  loom::test::ScopedEnv piece("LOOM_STAGING_PIECE_BYTES", "65536");
  constexpr int n = 3;
  constexpr size_t count = 100003;  // of 4-byte elements: 7 pieces, the last of 6796 bytes
  constexpr int calls = 5;
  constexpr uint64_t piecesPerCall = 7;
  const uint64_t before = loom::test::counter("staged_pieces");
  auto comms = loom::test::initThreadComms(n);
  onThreads(n, [&](int r) {
    const bool mixedDevice = r % 2 == 0;  // ranks 0 and 2 on the device, 1 on the host, in the mixed calls
    const auto run = [&](bool device, const void* in, void* out, size_t bytes, auto&& call) {
      DeviceBuffer din(bytes), dout(bytes);
      if (!device) return call(in, out);
      din.upload(in);
      dout.upload(out);
      const bool inPlace = in == out;
      const loomResult_t result = call(din.data(), inPlace ? din.data() : dout.data());
      (inPlace ? din : dout).download(out);
      return result;
    };
    std::vector<int32_t> input(count), output(count, -1);
    for (size_t i = 0; i < count; ++i) input[i] = static_cast<int32_t>(i) * (r + 1) + r;
    const auto sumAt = [&](size_t i) { return static_cast<int32_t>(i) * 6 + 3; };  // (1 + 2 + 3) i + 0 + 1 + 2
    const auto allReduce = [&](const void* in, void* out) {
      return loomAllReduce(in, out, count, loomInt32, loomSum, comms[r], nullptr);
    };
    // 1: every rank on the device, out of place.
    ASSERT_EQ(run(true, input.data(), output.data(), count * 4, allReduce), loomSuccess) << loomGetLastError(nullptr);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(output[i], sumAt(i)) << "all-reduce, rank " << r << ", element " << i;
    // 2: mixed, in place.
    std::vector<int32_t> inPlace = input;
    ASSERT_EQ(run(mixedDevice, inPlace.data(), inPlace.data(), count * 4, allReduce), loomSuccess);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(inPlace[i], sumAt(i)) << "in place, rank " << r << ", element " << i;
    // 3: a broadcast from rank 1 (on the host), mixed, out of place.
    std::vector<int32_t> sent(count), got(count, -1);
    for (size_t i = 0; i < count; ++i) sent[i] = static_cast<int32_t>(i ^ 0x5a5a);
    ASSERT_EQ(run(mixedDevice, sent.data(), got.data(), count * 4,
                  [&](const void* in, void* out) {
                    return loomBroadcast(in, out, count, loomInt32, 1, comms[r], nullptr);
                  }),
              loomSuccess);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], sent[i]) << "broadcast, rank " << r << ", element " << i;
    // 4: a reduce to rank 2, mixed, in place.
    std::vector<int32_t> reduced = input;
    ASSERT_EQ(run(mixedDevice, reduced.data(), reduced.data(), count * 4,
                  [&](const void* in, void* out) {
                    return loomReduce(in, out, count, loomInt32, loomSum, 2, comms[r], nullptr);
                  }),
              loomSuccess);
    if (r == 2) {
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(reduced[i], sumAt(i)) << "reduce, element " << i;
    }
    // 5: an average, mixed: (2 + 4 + 6) / 3 + (i mod 7), exact in float32.
    std::vector<float> values(count), mean(count, -1);
    for (size_t i = 0; i < count; ++i) values[i] = 2.0f * static_cast<float>(r + 1) + static_cast<float>(i % 7);
    ASSERT_EQ(run(mixedDevice, values.data(), mean.data(), count * 4,
                  [&](const void* in, void* out) {
                    return loomAllReduce(in, out, count, loomFloat32, loomAvg, comms[r], nullptr);
                  }),
              loomSuccess);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(mean[i], 4.0f + static_cast<float>(i % 7)) << "average, rank " << r << ", element " << i;
    }
  });
  loom::test::destroyAll(comms);
  EXPECT_EQ(loom::test::counter("staged_pieces") - before, calls * n * piecesPerCall);
}

// Pieces change nothing of an element's arithmetic: under
// LOOM_DETERMINISTIC=1 a float32 sum in pieces of device buffers has the
// bits of the same sum, whole, of host buffers: an all-reduce's, and a
// reduce-scatter's, whose pieces take rows of each block.
TEST(DevicePieces, DeterministicSumsInPiecesHaveTheWholeCallsBits) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  loom::test::ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  loom::test::ScopedEnv direct("LOOM_ALGO", "direct");  // deterministic, and staged
  constexpr int n = 3;
  constexpr size_t count = 70001;
  std::vector<std::vector<float>> inputs(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(r + 1);
    for (float& v : inputs[static_cast<size_t>(r)]) {  // magnitudes from 1e-4 to 1e4: rounding depends on the order
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = static_cast<float>(static_cast<double>(x % 20001) - 10000.0) * (x % 3 == 0 ? 1e-8f : 1.0f);
    }
  }
  constexpr size_t block = count / n;  // of the reduce-scatter, whose input is n such blocks of the same values
  // Each rank's results of one all-reduce then one reduce-scatter, side by
  // side, its buffers on the device or the host.
  const auto sum = [&](const char* pieceBytes, bool device) {
    loom::test::ScopedEnv piece("LOOM_STAGING_PIECE_BYTES", pieceBytes);
    std::vector<std::vector<float>> results(n, std::vector<float>(count + block));
    auto comms = loom::test::initThreadComms(n);
    onThreads(n, [&](int r) {
      const auto& in = inputs[static_cast<size_t>(r)];
      auto& out = results[static_cast<size_t>(r)];
      loomComm_t comm = comms[static_cast<size_t>(r)];
      if (!device) {
        ASSERT_EQ(loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess);
        ASSERT_EQ(loomReduceScatter(in.data(), out.data() + count, block, loomFloat32, loomSum, comm, nullptr),
                  loomSuccess);
        return;
      }
      DeviceBuffer din(count * 4), dout(count * 4);
      din.upload(in.data());
      ASSERT_EQ(loomAllReduce(din.data(), dout.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess)
          << loomGetLastError(comm);
      dout.download(out.data());
      DeviceBuffer dblock(block * 4);
      ASSERT_EQ(loomReduceScatter(din.data(), dblock.data(), block, loomFloat32, loomSum, comm, nullptr), loomSuccess)
          << loomGetLastError(comm);
      dblock.download(out.data() + count);
    });
    loom::test::destroyAll(comms);
    return results;
  };
  const uint64_t before = loom::test::counter("staged_pieces");
  const auto inPieces = sum("4096", true);
  constexpr size_t rowBytes = 4096 / n / 64 * 64;  // of each block of the reduce-scatter
  EXPECT_EQ(loom::test::counter("staged_pieces") - before,
            n * ((count * 4 + 4095) / 4096 + (block * 4 + rowBytes - 1) / rowBytes));
  const auto whole = sum("0", false);
  for (int r = 0; r < n; ++r) {
    const float* got = inPieces[static_cast<size_t>(r)].data();
    const float* want = whole[static_cast<size_t>(r)].data();
    EXPECT_EQ(std::memcmp(got, want, count * 4), 0) << "all-reduce, rank " << r;
    EXPECT_EQ(std::memcmp(got + count, want + count, block * 4), 0) << "reduce-scatter, rank " << r;
  }
}

// The calls in blocks (all-gather, reduce-scatter, all-to-all, gather,
// scatter) of a job with GPUs run in pieces of each block where their
// algorithm stages, every rank's blocks copied in and out a piece at a time
// as rows side by side: every element lands where it belongs, the last,
// shorter piece's too, and each byte of a device buffer crosses once each way.
TEST(DevicePieces, CallsInBlocksRunInPiecesAndAreExact) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  loom::test::ScopedEnv algorithms("LOOM_ALGO", "reducescatter:ring,allgather:ring,alltoall:direct,gather:direct,"
                                                "scatter:direct");  // staged
  loom::test::ScopedEnv piece("LOOM_STAGING_PIECE_BYTES", "65536");  // 21824 bytes of each of 3 blocks
  constexpr int n = 3;
  constexpr size_t nn = n;
  constexpr size_t count = 30011;  // of 4-byte elements in a block: 6 pieces, the last of 10924 bytes
  constexpr uint64_t piecesPerCall = 6;
  constexpr int root = 1;
  const uint64_t before = loom::test::counter("staged_pieces");
  const uint64_t stagedBefore = loom::cuda::fakeBytesStaged();
  auto comms = loom::test::initThreadComms(n);
  const auto value = [](int rank, size_t i) { return static_cast<int32_t>(i * 11 + static_cast<size_t>(rank) * 7001); };
  onThreads(n, [&](int r) {
    // `call(send, recv)` on device copies of `in` and `out`, `out` read back.
    const auto onDevice = [&](const std::vector<int32_t>& in, std::vector<int32_t>& out, auto&& call) {
      DeviceBuffer din(in.size() * 4), dout(out.size() * 4);
      din.upload(in.data());
      const loomResult_t result = call(din.data(), dout.data());
      dout.download(out.data());
      return result;
    };
    std::vector<int32_t> block(count), blocks(nn * count), gathered(nn * count), one(count);
    for (size_t i = 0; i < count; ++i) block[i] = value(r, i);
    for (size_t i = 0; i < nn * count; ++i) blocks[i] = value(r, i);
    loomComm_t comm = comms[static_cast<size_t>(r)];
    ASSERT_EQ(onDevice(block, gathered,
                       [&](void* s, void* d) { return loomAllGather(s, d, count, loomInt32, comm, nullptr); }),
              loomSuccess)
        << loomGetLastError(comm);
    for (size_t i = 0; i < nn * count; ++i) {
      ASSERT_EQ(gathered[i], value(static_cast<int>(i / count), i % count)) << "all-gather, rank " << r << ", " << i;
    }
    ASSERT_EQ(onDevice(blocks, one,
                       [&](void* s, void* d) {
                         return loomReduceScatter(s, d, count, loomInt32, loomSum, comm, nullptr);
                       }),
              loomSuccess);
    for (size_t i = 0; i < count; ++i) {
      int32_t sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, static_cast<size_t>(r) * count + i);
      ASSERT_EQ(one[i], sum) << "reduce-scatter, rank " << r << ", " << i;
    }
    ASSERT_EQ(onDevice(blocks, gathered,
                       [&](void* s, void* d) { return loomAlltoAll(s, d, count, loomInt32, comm, nullptr); }),
              loomSuccess);
    for (size_t i = 0; i < nn * count; ++i) {
      ASSERT_EQ(gathered[i], value(static_cast<int>(i / count), static_cast<size_t>(r) * count + i % count))
          << "all-to-all, rank " << r << ", " << i;
    }
    // The root's receive buffer alone is read and written; the others' are
    // as large (a device buffer of 0 bytes is none) but not touched.
    ASSERT_EQ(onDevice(block, gathered,
                       [&](void* s, void* d) { return loomGather(s, d, count, loomInt32, root, comm, nullptr); }),
              loomSuccess);
    if (r == root) {
      for (size_t i = 0; i < nn * count; ++i) {
        ASSERT_EQ(gathered[i], value(static_cast<int>(i / count), i % count)) << "gather, " << i;
      }
    }
    ASSERT_EQ(onDevice(blocks, one,
                       [&](void* s, void* d) { return loomScatter(s, d, count, loomInt32, root, comm, nullptr); }),
              loomSuccess);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(one[i], value(root, static_cast<size_t>(r) * count + i)) << "scatter, rank " << r << ", " << i;
    }
  });
  loom::test::destroyAll(comms);
  EXPECT_EQ(loom::test::counter("staged_pieces") - before, 5 * n * piecesPerCall);
  if (fake()) {
    // Of a block's C bytes: all-gather and reduce-scatter 4 C a rank, all-to-all
    // 6 C, gather and scatter 4 C at the root and C elsewhere: 54 C.
    EXPECT_EQ(loom::cuda::fakeBytesStaged() - stagedBefore, 54 * count * 4);
  }
}

// The fake device's GPUs as the in-place path sees them (peer_access.hpp):
// memory names the GPU it was made on, the same in every process; a thread's
// kernels reach their own GPU's, another's only with peer access, and an
// unknown one never. On a GPU machine: the machine's GPUs, each reaching its own.
TEST(PeerAccess, AGpuReachesItsOwnMemoryAndPeersOnlyWithAccess) {
  if (!fake()) {
    for (int d = 0; d < loom::cuda::deviceCount(); ++d) {
      loom::cuda::setCurrentDevice(d);
      DeviceBuffer mine(64);
      EXPECT_NE(loom::cuda::deviceIdOf(mine.data()), 0u) << "device " << d;
      EXPECT_TRUE(loom::cuda::canReachDevice(loom::cuda::deviceIdOf(mine.data()))) << "device " << d;
    }
    loom::cuda::setCurrentDevice(0);
    return;
  }
  struct Restore {
    ~Restore() {
      loom::cuda::setCurrentDevice(0);
      loom::cuda::fakeDeviceGpus(1, true);
    }
  } restore;
  loom::cuda::fakeDeviceGpus(2, false);
  loom::cuda::setCurrentDevice(1);
  EXPECT_EQ(loom::cuda::currentDevice(), 1);
  DeviceBuffer onOne(64);
  loom::cuda::setCurrentDevice(2);  // not a GPU the fake device shows: ignored
  EXPECT_EQ(loom::cuda::currentDevice(), 1);
  loom::cuda::setCurrentDevice(0);
  DeviceBuffer onZero(64);
  const uint64_t zero = loom::cuda::deviceIdOf(onZero.data());
  const uint64_t one = loom::cuda::deviceIdOf(onOne.data());
  EXPECT_NE(zero, 0u);
  EXPECT_NE(one, 0u);
  EXPECT_NE(zero, one);
  EXPECT_EQ(loom::cuda::deviceIdOf(onOne.data() + 17), one) << "an offset into an allocation";
  EXPECT_TRUE(loom::cuda::canReachDevice(zero));
  EXPECT_FALSE(loom::cuda::canReachDevice(one));
  EXPECT_FALSE(loom::cuda::canReachDevice(0));
  std::thread([&] {  // another thread has a current device of its own
    EXPECT_EQ(loom::cuda::currentDevice(), 0);
    loom::cuda::setCurrentDevice(1);
    EXPECT_TRUE(loom::cuda::canReachDevice(one));
    EXPECT_FALSE(loom::cuda::canReachDevice(zero));
  }).join();
  EXPECT_EQ(loom::cuda::currentDevice(), 0);
  loom::cuda::fakeDeviceGpus(2, true);
  EXPECT_TRUE(loom::cuda::canReachDevice(one));
  EXPECT_TRUE(loom::cuda::canReachDevice(zero));
  EXPECT_FALSE(loom::cuda::canReachDevice(zero + 8)) << "a GPU the fake device does not show";
}

// One rank on device memory: every collective, in and out of place, and
// in a group, is a copy of its own block on the call's stream (or nothing),
// exact, with no byte staged through pinned memory and no host algorithm
// (collectives/device_alone.hpp). A PreMulSum still takes the host path.
TEST(DeviceAlone, AOneRankCallIsACopyOnItsStreamAndStagesNothing) {
  SCOPED_TRACE(std::string("device memory: ") + loom::test::deviceMemoryKind());
  auto comms = loom::test::initThreadComms(1);
  constexpr size_t kCount = 100003;
  std::vector<int32_t> input(kCount), output(kCount);
  for (size_t i = 0; i < kCount; ++i) input[i] = static_cast<int32_t>(i * 7 + 1);
  DeviceBuffer send(kCount * 4), recv(kCount * 4);
  send.upload(input.data());
  const uint64_t staged = loom::cuda::fakeBytesStaged();
  using Call = std::function<loomResult_t(const void*, void*)>;
  const std::vector<std::pair<const char*, Call>> calls{
      {"all-reduce", [&](const void* s, void* r) { return loomAllReduce(s, r, kCount, loomInt32, loomSum, comms[0], nullptr); }},
      {"average", [&](const void* s, void* r) { return loomAllReduce(s, r, kCount, loomInt32, loomAvg, comms[0], nullptr); }},
      {"reduce", [&](const void* s, void* r) { return loomReduce(s, r, kCount, loomInt32, loomMax, 0, comms[0], nullptr); }},
      {"broadcast", [&](const void* s, void* r) { return loomBroadcast(s, r, kCount, loomInt32, 0, comms[0], nullptr); }},
      {"all-gather", [&](const void* s, void* r) { return loomAllGather(s, r, kCount, loomInt32, comms[0], nullptr); }},
      {"reduce-scatter", [&](const void* s, void* r) { return loomReduceScatter(s, r, kCount, loomInt32, loomProd, comms[0], nullptr); }},
      {"all-to-all", [&](const void* s, void* r) { return loomAlltoAll(s, r, kCount, loomInt32, comms[0], nullptr); }},
      {"gather", [&](const void* s, void* r) { return loomGather(s, r, kCount, loomInt32, 0, comms[0], nullptr); }},
      {"scatter", [&](const void* s, void* r) { return loomScatter(s, r, kCount, loomInt32, 0, comms[0], nullptr); }}};
  for (const auto& [name, run] : calls) {
    for (bool grouped : {false, true}) {
      SCOPED_TRACE(std::string(name) + (grouped ? " in a group" : ""));
      std::vector<int32_t> zeros(kCount, 0);
      recv.upload(zeros.data());
      if (grouped) {
        ASSERT_EQ(loomGroupStart(), loomSuccess);
      }
      ASSERT_EQ(run(send.data(), recv.data()), loomSuccess) << loomGetLastError(comms[0]);
      if (grouped) {
        ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
      }
      recv.download(output.data());
      EXPECT_EQ(output, input);
      if (std::string(name) == "all-to-all") continue;  // never in place
      ASSERT_EQ(run(recv.data(), recv.data()), loomSuccess) << "in place: " << loomGetLastError(comms[0]);
      recv.download(output.data());
      EXPECT_EQ(output, input) << "in place";
    }
  }
  if (fake()) {
    EXPECT_EQ(loom::cuda::fakeBytesStaged() - staged, 0u);
  }
  // A host buffer on one side is copied the same way.
  std::vector<int32_t> host(kCount, 0);
  ASSERT_EQ(loomAllReduce(send.data(), host.data(), kCount, loomInt32, loomSum, comms[0], nullptr), loomSuccess);
  EXPECT_EQ(host, input);
  if (fake()) {
    EXPECT_EQ(loom::cuda::fakeBytesStaged() - staged, 0u);
  }
  // PreMulSum scales: the host path, staged.
  float factor = 2.0f;
  loomRedOp_t op;
  ASSERT_EQ(loomRedOpCreatePreMulSum(&op, &factor, loomFloat32, loomScalarHostImmediate, comms[0]), loomSuccess);
  const std::vector<float> floats{1.5f, -2.0f, 3.25f};
  DeviceBuffer fsend(3 * 4), frecv(3 * 4);
  fsend.upload(floats.data());
  ASSERT_EQ(loomAllReduce(fsend.data(), frecv.data(), 3, loomFloat32, op, comms[0], nullptr), loomSuccess);
  std::vector<float> scaled(3);
  frecv.download(scaled.data());
  EXPECT_EQ(scaled, (std::vector<float>{3.0f, -4.0f, 6.5f}));
  loomRedOpDestroy(op, comms[0]);
  loom::test::destroyAll(comms);
}

// Each rank of loomCommInitAll is created on its devlist's device (NULL:
// i mod the devices; a device no GPU is refused by name), which
// loomCommCuDevice answers, as a rank of loomCommInitRank answers the device
// current on the thread that created it. On the fake device's two GPUs, or
// on a GPU machine's own.
TEST(DeviceComms, ARankIsOnTheDeviceItWasCreatedOn) {
  loom::test::deviceMemoryKind();
  const int gpus = fake() ? 2 : loom::cuda::deviceCount();
  struct Restore {
    ~Restore() {
      loom::cuda::setCurrentDevice(0);
      loom::cuda::fakeDeviceGpus(1, true);
    }
  } restore;
  if (fake()) loom::cuda::fakeDeviceGpus(gpus, true);
  const auto devicesOf = [](std::vector<loomComm_t>& comms) {
    std::vector<int> devices;
    for (loomComm_t comm : comms) {
      int d = -1;
      EXPECT_EQ(loomCommCuDevice(comm, &d), loomSuccess) << loomGetLastError(comm);
      devices.push_back(d);
    }
    loom::test::destroyAll(comms);
    return devices;
  };
  std::vector<loomComm_t> comms(3);
  const std::vector<int> devlist = {gpus - 1, 0, gpus - 1};
  ASSERT_EQ(loomCommInitAll(comms.data(), 3, devlist.data()), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(devicesOf(comms), devlist);
  ASSERT_EQ(loomCommInitAll(comms.data(), 3, nullptr), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(devicesOf(comms), (std::vector<int>{0, 1 % gpus, 2 % gpus}));
  const int bad[] = {0, gpus};
  EXPECT_EQ(loomCommInitAll(comms.data(), 2, bad), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("devlist[1]=" + std::to_string(gpus)), std::string::npos)
      << loomGetLastError(nullptr);
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loom::cuda::setCurrentDevice(gpus - 1);
  loomComm_t one = nullptr;
  ASSERT_EQ(loomCommInitRank(&one, 1, id, 0), loomSuccess);
  loom::cuda::setCurrentDevice(0);
  int d = -1;
  EXPECT_EQ(loomCommCuDevice(one, &d), loomSuccess);
  EXPECT_EQ(d, gpus - 1);
  EXPECT_EQ(loomCommCuDevice(one, nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(one)).find("device is NULL"), std::string::npos) << loomGetLastError(one);
  EXPECT_EQ(loomCommDestroy(one), loomSuccess);
}

// Pinned memory costs far more to allocate than to fill: a staging area lends
// the same buffer again for any size it covers, and a larger one when none does.
TEST(StagingArea, LendsItsBuffersAgain) {
  loom::test::deviceMemoryKind();  // the fake device, where no GPU is
  loom::cuda::StagingArea area;
  std::byte* first = nullptr;
  {
    auto lease = area.lease(1000);
    first = lease.data();
    std::memset(first, 1, 1000);
  }
  {
    auto again = area.lease(900);
    EXPECT_EQ(again.data(), first);
    auto other = area.lease(900);  // the first is out: another
    EXPECT_NE(other.data(), first);
  }
  {
    auto larger = area.lease(1 << 20);
    std::memset(larger.data(), 2, 1 << 20);  // as large as asked (ASan would see less)
  }
  // Leases from several threads at once: each has its buffer to itself.
  onThreads(4, [&](int r) {
    for (int i = 0; i < 50; ++i) {
      auto lease = area.lease(4096 + static_cast<size_t>(r));
      std::memset(lease.data(), r, 4096);
      std::this_thread::yield();
      for (size_t j = 0; j < 4096; ++j) ASSERT_EQ(static_cast<int>(lease.data()[j]), r);
    }
  });
}

// A stream that is neither NULL nor a loom host stream is a cudaStream_t only
// where a CUDA device is visible; elsewhere it is refused by name. The fake
// device knows its streams, and refuses a handle that is none of them.
TEST(DeviceStreams, AStreamThatIsNoneIsRefused) {
  if (!fake()) GTEST_SKIP() << "a CUDA device is visible: any handle may be a cudaStream_t";
  for (bool withFake : {false, true}) {
    SCOPED_TRACE(withFake ? "fake device" : "no device");
    loom::cuda::useFakeDevice(withFake);
    auto comms = loom::test::initThreadComms(1);
    std::vector<float> x(4, 1.0f);
    auto* bogus = reinterpret_cast<loomStream_t>(static_cast<uintptr_t>(0x1000));
    EXPECT_EQ(loomAllReduce(x.data(), x.data(), 4, loomFloat32, loomSum, comms[0], bogus), loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(comms[0])).find("stream"), std::string::npos)
        << loomGetLastError(comms[0]);
    EXPECT_EQ(loomSend(x.data(), 4, loomFloat32, 0, comms[0], bogus), loomInvalidArgument);
    loom::test::destroyAll(comms);
  }
  loom::cuda::useFakeDevice(true);
}

}  // namespace
