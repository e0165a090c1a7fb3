// A rank for the device in-place tests: all-reduces, all-gathers,
// reduce-scatters, broadcasts, reduces, all-to-alls, gathers and scatters
// (roots 1), and rings of sends and receives, of device buffers (a GPU's where one is visible, else the
// fake device's, whose memory peers map as they would through CUDA IPC), in
// and out of place, with sum, max, average and PreMulSum (rank r's scalar r + 1),
// checked against what every rank can compute, then a line with the bytes that went each way
// (and the pieces staged calls ran as: loomGetCounter's staged_pieces).
//   loom_test_device_collectives COUNT [host-on-rank-0 | refuse-ipc-on-rank-2 | gpu-per-rank | on-stream |
//                                       in-place-on-stream | in-place-on-a-full-gpu]
// (on-stream: only calls on a stream: in symmetric windows, and a ring of
// sends and receives; see onStream. in-place-on-stream: rounds of calls on a
// stream of plain device buffers, read in place once the peers opened them;
// see inPlaceOnStream. in-place-on-a-full-gpu: the same where no allocation on
// a stream of more than 1 MiB succeeds, on the fake device.)
// (refuse-ipc-on-rank-2: on the fake device, rank 2 cannot map its peers' buffers;
// gpu-per-rank: local rank r on GPU r, of the fake device's GPUs with peer
// access, or of a machine's GPUs r mod their count.)
// Values are small integers, so that int32 and float32 sums, maxima and
// PreMulSums are exact, as are int32 averages (the sum divided, truncated);
// a float32 average multiplies the exact sum by 1/n, two roundings (within
// 2^-22 of the value). Bfloat16 folds in float32, exactly here, and rounds
// the result once (within 2^-8; every sum of up to three ranks, below 2^8,
// is exact).
#include <loom/loom.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/device/cuda.hpp"
#include "base/device/fake_device.hpp"
#include "base/device/staging.hpp"
#include "base/half.hpp"
#include "base/device/runtime.hpp"
#include "tests/support/counters.hpp"
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

// Element `at` of `type` in `in`, as a double.
double get(loomDataType_t type, const std::byte* in) {
  switch (type) {
    case loomInt32: {
      int32_t v = 0;
      std::memcpy(&v, in, 4);
      return v;
    }
    case loomFloat32: {
      float f = 0;
      std::memcpy(&f, in, 4);
      return static_cast<double>(f);
    }
    default: {
      uint16_t b = 0;
      std::memcpy(&b, in, 2);
      return static_cast<double>(loom::cpu::bfloat16ToFloat(b));
    }
  }
}

// The ops the program runs; PreMulSum is rank r's scalar r + 1.
enum class Op { Sum, Max, Avg, PreMulSum };

// What op makes of every rank's element `at`, exactly (an int32 average truncated).
double expectedOf(Op op, loomDataType_t type, int n, size_t at) {
  double v = op == Op::Max ? valueOf(0, at) : 0.0;
  for (int r = 0; r < n; ++r) {
    const double x = valueOf(r, at);
    if (op == Op::Max) {
      v = std::max(v, x);
    } else {
      v += op == Op::PreMulSum ? (r + 1) * x : x;
    }
  }
  if (op == Op::Avg) v = type == loomInt32 ? std::trunc(v / n) : v / n;
  return v;
}

// How far a result may be from expectedOf (the file's opening says why).
double tolerance(Op op, loomDataType_t type, double expected) {
  if (op == Op::Max || type == loomInt32) return 0.0;
  if (type == loomBfloat16) return std::fabs(expected) * std::ldexp(1.0, -8);
  return op == Op::Avg ? std::fabs(expected) * std::ldexp(1.0, -22) : 0.0;
}

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, Gather, Scatter };
constexpr int kRoot = 1;  // of broadcast and reduce: not rank 0, which the host-on-rank-0 runs put on the host

// The loomRedOp_t of `op` for a call in `type`, created on `comm` for PreMulSum.
loomRedOp_t redOpOf(Op op, loomDataType_t type, int rank, loomComm_t comm) {
  switch (op) {
    case Op::Sum: return loomSum;
    case Op::Max: return loomMax;
    case Op::Avg: return loomAvg;
    case Op::PreMulSum: break;
  }
  std::byte scalar[4]{};
  put(type, rank + 1, scalar);
  loomRedOp_t created = loomSum;
  if (loomRedOpCreatePreMulSum(&created, scalar, type, loomScalarHostImmediate, comm) != loomSuccess) {
    std::printf("rank %d: loomRedOpCreatePreMulSum failed: %s\n", rank, loomGetLastError(comm));
    std::exit(1);
  }
  return created;
}

// One collective of `count` elements per block, checked; false on a mismatch (said on stdout).
bool runOne(loomComm_t comm, int rank, int n, Coll coll, loomDataType_t type, Op op, bool inPlace, size_t count,
            bool device) {
  const size_t size = type == loomBfloat16 ? 2 : 4;
  const size_t nn = static_cast<size_t>(n);
  const bool blocksIn = coll == Coll::ReduceScatter || coll == Coll::AlltoAll || coll == Coll::Scatter;
  const bool blocksOut = coll == Coll::AllGather || coll == Coll::AlltoAll || coll == Coll::Gather;
  const size_t sendCount = blocksIn ? nn * count : count;
  const size_t recvCount = blocksOut ? nn * count : count;
  // In place as NCCL has it: the block of this rank inside the larger buffer.
  const size_t bufferCount = std::max(sendCount, recvCount);
  std::vector<std::byte> input(sendCount * size);
  std::vector<double> expected(recvCount);
  for (size_t i = 0; i < sendCount; ++i) put(type, valueOf(rank, i), input.data() + i * size);
  for (size_t i = 0; i < recvCount; ++i) {
    if (coll == Coll::AllGather || coll == Coll::Gather) {
      expected[i] = valueOf(static_cast<int>(i / count), i % count);
    } else if (coll == Coll::AlltoAll) {
      expected[i] = valueOf(static_cast<int>(i / count), static_cast<size_t>(rank) * count + i % count);
    } else if (coll == Coll::Scatter) {
      expected[i] = valueOf(kRoot, static_cast<size_t>(rank) * count + i);
    } else if (coll == Coll::Broadcast) {
      expected[i] = valueOf(kRoot, i);
    } else {
      expected[i] = expectedOf(op, type, n, coll == Coll::ReduceScatter ? static_cast<size_t>(rank) * count + i : i);
    }
  }
  const size_t blockAt = static_cast<size_t>(rank) * count * size;  // this rank's block in the larger buffer
  const size_t rootAt = static_cast<size_t>(kRoot) * count * size;  // the root's, for gather and scatter
  std::vector<std::byte> host(bufferCount * size), hostOut(recvCount * size);
  loom::test::DeviceBuffer dbuf(bufferCount * size), dout(recvCount * size);
  std::byte* buffer = device ? dbuf.data() : host.data();
  std::byte* send = buffer;
  std::byte* recv = device ? dout.data() : hostOut.data();
  if (inPlace) {
    recv = buffer;
    if (coll == Coll::AllGather) send = buffer + blockAt;
    if (coll == Coll::Gather) send = buffer + rootAt;
    if (coll == Coll::Scatter) recv = buffer + rootAt;
  }
  std::vector<std::byte> image(bufferCount * size);
  std::memcpy(image.data() + (send - buffer), input.data(), input.size());
  if (device) {
    dbuf.upload(image.data());
  } else {
    host = image;
  }
  const loomRedOp_t redOp = redOpOf(op, type, rank, comm);
  loomResult_t result = loomSuccess;
  switch (coll) {
    case Coll::AllReduce: result = loomAllReduce(send, recv, count, type, redOp, comm, nullptr); break;
    case Coll::AllGather: result = loomAllGather(send, recv, count, type, comm, nullptr); break;
    case Coll::ReduceScatter:
      if (inPlace) recv = buffer + blockAt;
      result = loomReduceScatter(send, recv, count, type, redOp, comm, nullptr);
      break;
    case Coll::Broadcast: result = loomBroadcast(send, recv, count, type, kRoot, comm, nullptr); break;
    case Coll::Reduce: result = loomReduce(send, recv, count, type, redOp, kRoot, comm, nullptr); break;
    case Coll::AlltoAll: result = loomAlltoAll(send, recv, count, type, comm, nullptr); break;
    case Coll::Gather: result = loomGather(send, recv, count, type, kRoot, comm, nullptr); break;
    case Coll::Scatter: result = loomScatter(send, recv, count, type, kRoot, comm, nullptr); break;
  }
  if (op == Op::PreMulSum) loomRedOpDestroy(redOp, comm);
  if (result != loomSuccess) {
    std::printf("rank %d: collective %d failed: %s\n", rank, static_cast<int>(coll), loomGetLastError(comm));
    return false;
  }
  // Only the root of a reduce or gather gets a result; a broadcast's root keeps its input.
  if ((coll == Coll::Reduce || coll == Coll::Gather) && rank != kRoot) return true;
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
  for (size_t at = 0; at < recvCount; ++at) {
    const double got = get(type, output.data() + at * size);
    if (std::fabs(got - expected[at]) <= tolerance(op, type, expected[at])) continue;
    std::printf("rank %d: collective %d type %d op %d %s: element %zu of %zu is %.9g, not %.9g\n", rank,
                static_cast<int>(coll), static_cast<int>(type), static_cast<int>(op),
                inPlace ? "in place" : "out of place", at, recvCount, got, expected[at]);
    return false;
  }
  return true;
}

// Each rank sends `count` int32 to the next and receives from the previous, in
// one group; false on a mismatch (said on stdout).
bool sendRing(loomComm_t comm, int rank, int n, size_t count, bool device, int round) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const auto value = [&](int from, size_t i) {
    return static_cast<int32_t>(i * 11 + static_cast<size_t>(from) * 7 + round);
  };
  std::vector<int32_t> out(count), in(count, -1);
  for (size_t i = 0; i < count; ++i) out[i] = value(rank, i);
  loom::test::DeviceBuffer dout(count * 4), din(count * 4);
  dout.upload(out.data());
  din.upload(in.data());
  void* send = device ? static_cast<void*>(dout.data()) : out.data();
  void* recv = device ? static_cast<void*>(din.data()) : in.data();
  loomGroupStart();
  loomSend(send, count, loomInt32, next, comm, nullptr);
  loomRecv(recv, count, loomInt32, prev, comm, nullptr);
  if (loomGroupEnd() != loomSuccess) {
    std::printf("rank %d: send ring %d failed: %s\n", rank, round, loomGetLastError(comm));
    return false;
  }
  if (device) din.download(in.data());
  for (size_t i = 0; i < count; ++i) {
    if (in[i] == value(prev, i)) continue;
    std::printf("rank %d: send ring %d: element %zu of %zu is %d, not %d\n", rank, round, i, count, in[i],
                value(prev, i));
    return false;
  }
  // The buffer the next rank took by handle, read in place by an all-reduce:
  // that rank's process opens it a second time, which CUDA refuses
  // (resource already mapped) unless the process shares what it opened.
  if (loomAllReduce(send, recv, count, loomInt32, loomSum, comm, nullptr) != loomSuccess) {
    std::printf("rank %d: all-reduce after send ring %d failed: %s\n", rank, round, loomGetLastError(comm));
    return false;
  }
  if (device) din.download(in.data());
  for (size_t i = 0; i < count; ++i) {
    int32_t sum = 0;
    for (int r = 0; r < n; ++r) sum += value(r, i);
    if (in[i] == sum) continue;
    std::printf("rank %d: all-reduce after send ring %d: element %zu is %d, not %d\n", rank, round, i, in[i], sum);
    return false;
  }
  return true;
}

// A call on a stream whose result lands in a device buffer of int32.
struct StreamCall {
  const char* name;
  std::function<loomResult_t()> run;
  std::function<int32_t(size_t)> expected;  // element i of the result
  size_t elements;                          // checked (0: this rank has no result)
  bool sends = true;                        // this rank's input is read
};

// Runs `c` and waits for its stream; false on a failure or a wrong element
// (said on stdout).
bool runChecked(loomComm_t comm, int rank, const StreamCall& c, loom::test::DeviceBuffer& out,
                const std::function<bool()>& finish) {
  if (c.run() != loomSuccess || !finish()) {
    std::printf("rank %d: %s on the stream failed: %s\n", rank, c.name, loomGetLastError(comm));
    return false;
  }
  std::vector<int32_t> got(out.size() / 4);
  out.download(got.data());
  for (size_t i = 0; i < c.elements; ++i) {
    if (got[i] == c.expected(i)) continue;
    std::printf("rank %d: %s on the stream: element %zu is %d, not %d\n", rank, c.name, i, got[i], c.expected(i));
    return false;
  }
  return true;
}

// A ring on `stream`, grouped: this rank sends `elements` of `from` to the
// next rank and receives the previous rank's into `into`, rank r's element i
// being 3 x value(r, i) + 1; false on a wrong element or a failure (said on
// stdout).
bool ringOnStream(loomComm_t comm, int rank, int n, loom::test::DeviceBuffer& from, loom::test::DeviceBuffer& into,
                  size_t elements, const std::function<int32_t(int, size_t)>& value, void* stream,
                  const std::function<bool()>& finish) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<int32_t> mine(elements), got(elements, -1);
  for (size_t i = 0; i < elements; ++i) mine[i] = value(rank, i) * 3 + 1;
  from.upload(mine.data());
  const auto st = static_cast<loomStream_t>(stream);
  loomGroupStart();
  loomSend(from.data(), elements, loomInt32, next, comm, st);
  loomRecv(into.data(), elements, loomInt32, prev, comm, st);
  if (loomGroupEnd() != loomSuccess || !finish()) {
    std::printf("rank %d: the ring on the stream failed: %s\n", rank, loomGetLastError(comm));
    return false;
  }
  into.download(got.data());
  for (size_t i = 0; i < elements; ++i) {
    if (got[i] == value(prev, i) * 3 + 1) continue;
    std::printf("rank %d: the ring on the stream: element %zu is %d, not %d\n", rank, i, got[i],
                value(prev, i) * 3 + 1);
    return false;
  }
  return true;
}

// On a CUDA stream (the fake device's, or a GPU's), calls whose send buffers
// lie in symmetric windows, read in place across processes through the
// windows' IPC views, and a ring of sends and receives queued on the stream
// (resident point-to-point); false on a mismatch (said on stdout).
bool onStream(loomComm_t comm, int rank, int n, size_t count) {
  loom::cuda::DeviceRuntime& rt = loom::cuda::runtime();
  void* stream = rt.createStream();
  const auto finish = [&] {
    for (int i = 0; i < 600000 && !rt.idle(stream); ++i) ::usleep(100);
    return rt.idle(stream);
  };
  const size_t nn = static_cast<size_t>(n);
  const size_t windowBytes = 4096 + count * nn * 4;
  bool ok = true;
  {
    loom::test::DeviceBuffer window(windowBytes), out(count * nn * 4);
    loomWindow_t win = nullptr;
    if (loomCommWindowRegister(comm, window.data(), windowBytes, &win, LOOM_WIN_COLL_SYMMETRIC) != loomSuccess) {
      std::printf("rank %d: window: %s\n", rank, loomGetLastError(comm));
      return false;
    }
    auto* send = static_cast<std::byte*>(window.data()) + 4096;
    std::vector<int32_t> in(count * nn);
    for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(rank, i);
    rt.copyNow(send, in.data(), in.size() * 4);
    const auto peerValue = [](int r, size_t i) { return valueOf(r, i); };
    using Call = StreamCall;
    const auto st = static_cast<loomStream_t>(stream);
    const std::vector<Call> calls{
        {"all-reduce", [&] { return loomAllReduce(send, out.data(), count, loomInt32, loomSum, comm, st); },
         [&](size_t i) {
           int32_t sum = 0;
           for (int r = 0; r < n; ++r) sum += peerValue(r, i);
           return sum;
         },
         count},
        {"all-gather", [&] { return loomAllGather(send, out.data(), count, loomInt32, comm, st); },
         [&](size_t i) { return peerValue(static_cast<int>(i / count), i % count); }, count * nn},
        {"reduce-scatter", [&] { return loomReduceScatter(send, out.data(), count, loomInt32, loomMax, comm, st); },
         [&](size_t i) {
           int32_t most = peerValue(0, static_cast<size_t>(rank) * count + i);
           for (int r = 1; r < n; ++r) most = std::max(most, peerValue(r, static_cast<size_t>(rank) * count + i));
           return most;
         },
         count},
        {"all-to-all", [&] { return loomAlltoAll(send, out.data(), count, loomInt32, comm, st); },
         [&](size_t i) { return peerValue(static_cast<int>(i / count), static_cast<size_t>(rank) * count + i % count); },
         count * nn}};
    for (const Call& c : calls) {
      if (!runChecked(comm, rank, c, out, finish)) ok = false;
    }
    if (loomCommWindowDeregister(comm, win) != loomSuccess) ok = false;
  }
  // A ring on the stream, two messages each way of several pieces.
  {
    const size_t elements = 3 * count + 1;
    loom::test::DeviceBuffer dout(elements * 4), din(elements * 4);
    if (!ringOnStream(comm, rank, n, dout, din, elements, valueOf, stream, finish)) ok = false;
  }
  rt.destroyStream(stream);
  return ok;
}

// Four rounds, on a CUDA stream, of every collective (roots 1, out of place)
// and a ring of sends of more than two 512 KiB pieces, of plain device
// buffers (no window), the same buffers every round with new values, the
// ranks in step between rounds (a host all-reduce). A rank's peers read its
// buffers in place once every peer has opened their allocations
// (comm/resident_regions.hpp): a rank publishes an allocation in its first
// call on it, its peers open it at the start of their next call, and it
// offers it from the call after, so from the third round on here, every
// call of a rank that sends (all but a broadcast's or a scatter's non-root)
// is read in place, with nothing copied into the scratch. Says so as
// "in place from round 2: A of B calls, S sends, copied C bytes"; false on a
// wrong element.
bool inPlaceOnStream(loomComm_t comm, int rank, int n, size_t count) {
  loom::cuda::DeviceRuntime& rt = loom::cuda::runtime();
  void* stream = rt.createStream();
  const auto st = static_cast<loomStream_t>(stream);
  const auto finish = [&] {
    for (int i = 0; i < 600000 && !rt.idle(stream); ++i) ::usleep(100);
    return rt.idle(stream);
  };
  const size_t nn = static_cast<size_t>(n);
  const size_t elements = 3 * count + 1;  // of a message: 3 x 560 KB at 140001
  loom::test::DeviceBuffer send(count * nn * 4), recv(count * nn * 4), message(elements * 4), arrived(elements * 4);
  std::vector<int32_t> in(count * nn);
  int round = 0;
  const auto value = [&](int r, size_t i) { return valueOf(r, i) + round * 5; };
  const auto sum = [&](size_t i) {
    int32_t s = 0;
    for (int r = 0; r < n; ++r) s += value(r, i);
    return s;
  };
  using Call = StreamCall;
  const bool root = rank == 1;
  const std::vector<Call> calls{
      {"all-reduce", [&] { return loomAllReduce(send.data(), recv.data(), count, loomInt32, loomSum, comm, st); }, sum,
       count, true},
      {"all-gather", [&] { return loomAllGather(send.data(), recv.data(), count, loomInt32, comm, st); },
       [&](size_t i) { return value(static_cast<int>(i / count), i % count); }, count * nn, true},
      {"reduce-scatter",
       [&] { return loomReduceScatter(send.data(), recv.data(), count, loomInt32, loomMax, comm, st); },
       [&](size_t i) {
         int32_t most = value(0, static_cast<size_t>(rank) * count + i);
         for (int r = 1; r < n; ++r) most = std::max(most, value(r, static_cast<size_t>(rank) * count + i));
         return most;
       },
       count, true},
      {"all-to-all", [&] { return loomAlltoAll(send.data(), recv.data(), count, loomInt32, comm, st); },
       [&](size_t i) { return value(static_cast<int>(i / count), static_cast<size_t>(rank) * count + i % count); },
       count * nn, true},
      {"broadcast", [&] { return loomBroadcast(send.data(), recv.data(), count, loomInt32, 1, comm, st); },
       [&](size_t i) { return value(1, i); }, count, root},
      {"reduce", [&] { return loomReduce(send.data(), recv.data(), count, loomInt32, loomSum, 1, comm, st); }, sum,
       root ? count : 0, true},
      {"gather", [&] { return loomGather(send.data(), recv.data(), count, loomInt32, 1, comm, st); },
       [&](size_t i) { return value(static_cast<int>(i / count), i % count); }, root ? count * nn : 0, true},
      {"scatter", [&] { return loomScatter(send.data(), recv.data(), count, loomInt32, 1, comm, st); },
       [&](size_t i) { return value(1, static_cast<size_t>(rank) * count + i); }, count, root}};
  // In place, in its own buffer, uploaded before each call: past one piece
  // in one shot (2 ranks, 600001 elements), its result is put aside and its
  // buffer read in place, the one copy the result's way back.
  const Call inPlaceAllReduce{
      "all-reduce in place",
      [&] { return loomAllReduce(recv.data(), recv.data(), count, loomInt32, loomSum, comm, st); }, sum, count, true};
  bool ok = true;
  uint64_t offered = 0, sending = 0, sends = 0, copied = 0, inPlaceOffered = 0, inPlaceCopied = 0;
  for (round = 0; round < 4; ++round) {
    for (size_t i = 0; i < in.size(); ++i) in[i] = value(rank, i);
    send.upload(in.data());
    const uint64_t offeredBefore = loom::test::counter("resident_calls_offered_in_place");
    const uint64_t sendsBefore = loom::test::counter("resident_sends_read_in_place");
    const uint64_t copiedBefore = loom::cuda::fakeBytesCopied();
    for (const Call& c : calls) {
      if (!runChecked(comm, rank, c, recv, finish)) ok = false;
      if (round >= 2 && c.sends) ++sending;
    }
    if (!ringOnStream(comm, rank, n, message, arrived, elements, value, stream, finish)) ok = false;
    if (round >= 2) {
      offered += loom::test::counter("resident_calls_offered_in_place") - offeredBefore;
      sends += loom::test::counter("resident_sends_read_in_place") - sendsBefore;
      copied += loom::cuda::fakeBytesCopied() - copiedBefore;
    }
    recv.upload(in.data());
    const uint64_t inPlaceOfferedBefore = loom::test::counter("resident_calls_offered_in_place");
    const uint64_t inPlaceCopiedBefore = loom::cuda::fakeBytesCopied();
    if (!runChecked(comm, rank, inPlaceAllReduce, recv, finish)) ok = false;
    if (round >= 2) {
      inPlaceOffered += loom::test::counter("resident_calls_offered_in_place") - inPlaceOfferedBefore;
      inPlaceCopied += loom::cuda::fakeBytesCopied() - inPlaceCopiedBefore;
    }
    int32_t one = 1, ranks = 0;  // every rank through the round before the next
    if (loomAllReduce(&one, &ranks, 1, loomInt32, loomSum, comm, nullptr) != loomSuccess || ranks != n) ok = false;
  }
  std::printf("rank %d: in place from round 2: %llu of %llu calls, %llu sends, copied %llu bytes\n", rank,
              static_cast<unsigned long long>(offered), static_cast<unsigned long long>(sending),
              static_cast<unsigned long long>(sends), static_cast<unsigned long long>(copied));
  std::printf("rank %d: all-reduce in place from round 2: %llu of 2 offered, copied %llu bytes\n", rank,
              static_cast<unsigned long long>(inPlaceOffered), static_cast<unsigned long long>(inPlaceCopied));
  rt.destroyStream(stream);
  return ok;
}

// One all-reduce of device memory on a CUDA stream (resident where the
// ranks' areas are ready), checked; says how many calls went resident.
bool allReduceOnStream(loomComm_t comm, int rank, int n, size_t count) {
  loom::cuda::DeviceRuntime& rt = loom::cuda::runtime();
  void* stream = rt.createStream();
  std::vector<int32_t> in(count), got(count);
  for (size_t i = 0; i < count; ++i) in[i] = valueOf(rank, i);
  loom::test::DeviceBuffer send(count * 4), recv(count * 4);
  send.upload(in.data());
  const uint64_t before = loom::test::counter("resident_calls");
  bool ok = loomAllReduce(send.data(), recv.data(), count, loomInt32, loomSum, comm, static_cast<loomStream_t>(stream)) ==
            loomSuccess;
  for (int i = 0; ok && i < 600000 && !rt.idle(stream); ++i) ::usleep(100);
  ok = ok && rt.idle(stream);
  if (!ok) std::printf("rank %d: the all-reduce on the stream failed: %s\n", rank, loomGetLastError(comm));
  std::printf("rank %d: resident calls %llu\n", rank,
              static_cast<unsigned long long>(loom::test::counter("resident_calls") - before));
  if (ok) {
    recv.download(got.data());
    for (size_t i = 0; i < count; ++i) {
      int32_t sum = 0;
      for (int r = 0; r < n; ++r) sum += valueOf(r, i);
      if (got[i] == sum) continue;
      std::printf("rank %d: the all-reduce on the stream: element %zu is %d, not %d\n", rank, i, got[i], sum);
      ok = false;
      break;
    }
  }
  rt.destroyStream(stream);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const size_t count = std::strtoull(argv[1], nullptr, 10);
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool hostOnRank0 = mode == "host-on-rank-0";
  loom::test::deviceMemoryKind();
  if (mode == "gpu-per-rank") {
    // Before the communicator, which may start CUDA on the current device.
    const char* local = std::getenv("LOOM_LOCAL_RANK");
    const int localRank = local != nullptr ? std::atoi(local) : 0;
    constexpr int kFakeGpus = 8;
    if (loom::cuda::fakeDevice()) loom::cuda::fakeDeviceGpus(kFakeGpus, true);
    const int gpus = loom::cuda::fakeDevice() ? kFakeGpus : loom::cuda::deviceCount();
    loom::cuda::setCurrentDevice(localRank % gpus);
  }
  if (mode == "scratch-differs-on-rank-1") {
    const char* rankVar = std::getenv("LOOM_RANK");
    if (rankVar != nullptr && std::atoi(rankVar) == 1) ::setenv("LOOM_DEVICE_SCRATCH_BYTES", "131072", 1);
  }
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
  const uint64_t inPlaceBefore = loom::test::counter("host_kernel_bytes");
  const uint64_t byHandleBefore = loom::test::counter("bytes_taken_by_handle");
  const uint64_t piecesBefore = loom::test::counter("staged_pieces");
  int failures = 0;
  if (mode == "all-reduce-on-stream" || mode == "scratch-differs-on-rank-1") {
    const bool ok = allReduceOnStream(comm, rank, n, count);
    if (ok) std::printf("rank %d: on the stream ok\n", rank);
    return loomCommDestroy(comm) == loomSuccess && ok ? 0 : 1;
  }
  if (mode == "in-place-on-stream" || mode == "in-place-on-a-full-gpu") {
    // A full GPU: no allocation on a stream of more than 1 MiB (the fake device's).
    if (mode == "in-place-on-a-full-gpu") loom::cuda::fakeStreamMemoryBytes(size_t{1} << 20);
    const bool ok = inPlaceOnStream(comm, rank, n, count);
    if (ok) std::printf("rank %d: on the stream ok\n", rank);
    return loomCommDestroy(comm) == loomSuccess && ok ? 0 : 1;
  }
  if (mode == "on-stream") {
    const uint64_t inWindows = loom::test::counter("resident_calls_in_windows");
    const uint64_t p2p = loom::test::counter("resident_p2p_ops");
    if (!onStream(comm, rank, n, count)) ++failures;
    std::printf("rank %d: read in windows %llu calls, resident sends and receives %llu\n", rank,
                static_cast<unsigned long long>(loom::test::counter("resident_calls_in_windows") - inWindows),
                static_cast<unsigned long long>(loom::test::counter("resident_p2p_ops") - p2p));
    if (failures == 0) std::printf("rank %d: on the stream ok\n", rank);
    return loomCommDestroy(comm) == loomSuccess && failures == 0 ? 0 : 1;
  }
  for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce,
                    Coll::AlltoAll, Coll::Gather, Coll::Scatter}) {
    for (loomDataType_t type : {loomFloat32, loomInt32, loomBfloat16}) {
      for (Op op : {Op::Sum, Op::Max, Op::Avg, Op::PreMulSum}) {
        const bool reduces = coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::Reduce;
        if (!reduces && op != Op::Sum) continue;
        for (bool inPlace : {false, true}) {
          if (coll == Coll::AlltoAll && inPlace) continue;  // all-to-all does not run in place
          if (!runOne(comm, rank, n, coll, type, op, inPlace, count, device)) ++failures;
        }
      }
    }
  }
  // Twice: where a receiver refused the first message's handle, the second
  // is staged. Eight times the count, so that a message passes the 4 MiB
  // FIFO (what goes by handle) where COUNT passes a segment slot.
  for (int round = 0; round < 2; ++round) {
    if (!sendRing(comm, rank, n, 8 * count, device, round)) ++failures;
  }
  std::printf("rank %d: received by handle %llu bytes\n", rank,
              static_cast<unsigned long long>(loom::test::counter("bytes_taken_by_handle") - byHandleBefore));
  std::printf("rank %d of %d (%s): in place %llu bytes, staged %llu bytes, pieces %llu\n", rank, n,
              device ? "device" : "host",
              static_cast<unsigned long long>(loom::test::counter("host_kernel_bytes") - inPlaceBefore),
              static_cast<unsigned long long>(loom::cuda::fakeBytesStaged() - stagedBefore),
              static_cast<unsigned long long>(loom::test::counter("staged_pieces") - piecesBefore));
  if (failures == 0) std::printf("rank %d: collectives ok\n", rank);
  return loomCommDestroy(comm) == loomSuccess && failures == 0 ? 0 : 1;
}
