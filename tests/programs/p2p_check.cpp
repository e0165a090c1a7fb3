// A rank for the point-to-point process tests (and the network-namespace
// script). Initializes from the launcher's environment, then runs one mode:
//   matrix [KI]         every dtype x counts 0, 1, 7, 4095, KI Ki+3 (default
//                       1024), with every other rank at once (one group),
//                       unaligned buffers
//   large TYPES [MI]    MI Mi elements (default 64) of each listed dtype (e.g.
//                       int8,float64 or all) around the ring
//   flood               3000 one-element messages each way with every peer at once
//   ring ITERS          grouped ring exchanges of 4 MiB
//   victim R MS         rank R SIGKILLs itself MS ms into endless large transfers
//                       with rank 1-R, leaving a segment name in /dev/shm; the
//                       survivor must fail (exit 0) not hang, and remove it
// Exit status 0 on success; the first wrong byte is printed.
#include <loom/loom.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/pattern.hpp"

using loom::test::fillPattern;
using loom::test::firstMismatch;
using loom::test::messageSeed;

namespace {

struct Type {
  const char* name;
  loomDataType_t type;
  size_t size;
};
constexpr Type kTypes[] = {{"int8", loomInt8, 1},       {"uint8", loomUint8, 1},     {"int32", loomInt32, 4},
                           {"uint32", loomUint32, 4},   {"int64", loomInt64, 8},     {"uint64", loomUint64, 8},
                           {"float16", loomFloat16, 2}, {"bfloat16", loomBfloat16, 2}, {"float32", loomFloat32, 4},
                           {"float64", loomFloat64, 8}};

int rank = -1, size = 0;
loomComm_t comm = nullptr;

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    loomResult_t r_ = (call);                                                                        \
    if (r_ != loomSuccess) {                                                                         \
      std::printf("rank %d: %s failed: %s: %s\n", rank, #call, loomGetErrorString(r_), loomGetLastError(nullptr)); \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

// With every peer at once: send `count` elements, receive as many, check them.
bool exchangeAll(const Type& t, size_t count, uint64_t index) {
  const size_t bytes = count * t.size;
  std::vector<std::vector<std::byte>> out(size), in(size);
  CHECK(loomGroupStart());
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    out[p].resize(bytes + 1);
    in[p].resize(bytes + 5);
    fillPattern(std::span(out[p]).subspan(1, bytes), messageSeed(rank, p, index));
    CHECK(loomSend(out[p].data() + 1, count, t.type, p, comm, nullptr));
    CHECK(loomRecv(in[p].data() + 5, count, t.type, p, comm, nullptr));
  }
  CHECK(loomGroupEnd());
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    long long bad = firstMismatch(std::span(in[p]).subspan(5, bytes), messageSeed(p, rank, index));
    if (bad >= 0) {
      std::printf("rank %d: %s x %zu from rank %d: byte %lld is wrong\n", rank, t.name, count, p, bad);
      return false;
    }
  }
  return true;
}

bool matrix(size_t kibi) {
  uint64_t index = 0;
  for (const auto& t : kTypes) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4095}, (kibi << 10) + 3}) {
      if (!exchangeAll(t, count, index++)) return false;
    }
  }
  return true;
}

// Around the ring: send to rank+1, receive from rank-1.
bool ringOnce(std::span<std::byte> out, std::span<std::byte> in, size_t count, const Type& t, uint64_t index) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  fillPattern(out, messageSeed(rank, next, index));
  CHECK(loomGroupStart());
  CHECK(loomSend(out.data(), count, t.type, next, comm, nullptr));
  CHECK(loomRecv(in.data(), count, t.type, prev, comm, nullptr));
  CHECK(loomGroupEnd());
  long long bad = firstMismatch(in, messageSeed(prev, rank, index));
  if (bad >= 0) std::printf("rank %d: %s x %zu from rank %d: byte %lld is wrong\n", rank, t.name, count, prev, bad);
  return bad < 0;
}

bool large(const std::string& types, size_t mebi) {
  const auto listed = [&](const auto& t) {
    return types == "all" || ("," + types + ",").find("," + std::string(t.name) + ",") != std::string::npos;
  };
  const size_t count = mebi << 20;
  size_t widest = 0;
  for (const auto& t : kTypes) {
    if (listed(t)) widest = std::max(widest, t.size);
  }
  std::vector<std::byte> out(count * widest), in(count * widest);
  uint64_t index = 100;
  for (const auto& t : kTypes) {
    if (!listed(t)) continue;
    auto o = std::span(out).first(count * t.size), i = std::span(in).first(count * t.size);
    if (!ringOnce(o, i, count, t, index++)) return false;
  }
  return true;
}

bool flood() {
  constexpr int messages = 3000;
  std::vector<loomStream_t> sends(size), recvs(size);
  std::vector<std::vector<uint64_t>> out(size, std::vector<uint64_t>(messages)), in(size, std::vector<uint64_t>(messages));
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    CHECK(loomStreamCreate(&sends[p]));
    CHECK(loomStreamCreate(&recvs[p]));
    for (int i = 0; i < messages; ++i) {
      out[p][i] = messageSeed(rank, p, static_cast<uint64_t>(i));
      CHECK(loomSend(&out[p][i], 1, loomUint64, p, comm, sends[p]));
      CHECK(loomRecv(&in[p][i], 1, loomUint64, p, comm, recvs[p]));
    }
  }
  bool ok = true;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    CHECK(loomStreamSynchronize(sends[p]));
    CHECK(loomStreamSynchronize(recvs[p]));
    for (int i = 0; i < messages && ok; ++i) {
      if (in[p][i] != messageSeed(p, rank, static_cast<uint64_t>(i))) {
        std::printf("rank %d: message %d from rank %d is wrong\n", rank, i, p);
        ok = false;
      }
    }
    CHECK(loomStreamDestroy(sends[p]));
    CHECK(loomStreamDestroy(recvs[p]));
  }
  return ok;
}

bool ring(int iterations) {
  const size_t bytes = 4 << 20;
  std::vector<std::byte> out(bytes), in(bytes);
  for (int i = 0; i < iterations; ++i) {
    if (!ringOnce(out, in, bytes, kTypes[1], static_cast<uint64_t>(i))) return false;
  }
  return true;
}

// Returns only on the survivor, with whether it failed cleanly.
bool victim(int victimRank, int delayMs) {
  if (rank == victimRank) {
    // What a rank killed between creating a FIFO's segment and its peer's
    // unlink leaves behind (a window of microseconds, rarely hit): a name
    // in /dev/shm. The survivor must remove it when its communicator ends.
    const std::string left = "/dev/shm/loom-" + std::to_string(::getpid()) + "-00000000000dead0";
    if (FILE* f = std::fopen(left.c_str(), "w")) std::fclose(f);
    std::thread([delayMs] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
      ::raise(SIGKILL);
    }).detach();
  }
  const size_t bytes = 256 << 20;
  std::vector<std::byte> buffer(bytes, std::byte{1});
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    loomResult_t r = rank == 0 ? loomSend(buffer.data(), bytes, loomUint8, 1, comm, nullptr)
                               : loomRecv(buffer.data(), bytes, loomUint8, 0, comm, nullptr);
    if (r == loomSuccess) continue;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rank %d: failed after %.2f s with %s: %s\n", rank, seconds, loomGetErrorString(r),
                loomGetLastError(comm));
    return r == loomRemoteError || r == loomTimeout;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  if (loomCommInitFromEnv(&comm, nullptr) != loomSuccess) {
    std::printf("init failed: %s\n", loomGetLastError(nullptr));
    return 1;
  }
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &size);
  bool ok = false;
  if (mode == "matrix") ok = matrix(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024);
  else if (mode == "large" && argc > 2) ok = large(argv[2], argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 64);
  else if (mode == "flood") ok = flood();
  else if (mode == "ring" && argc > 2) ok = ring(std::atoi(argv[2]));
  else if (mode == "victim" && argc > 3) {
    bool failedCleanly = victim(std::atoi(argv[2]), std::atoi(argv[3]));
    loomCommAbort(comm);
    return failedCleanly ? 0 : 1;
  } else {
    std::printf("unknown mode %s\n", mode.c_str());
    return 2;
  }
  CHECK(loomCommBarrier(comm));
  std::printf("rank %d of %d: %s %s\n", rank, size, mode.c_str(), ok ? "ok" : "FAILED");
  CHECK(loomCommDestroy(comm));
  return ok ? 0 : 1;
}
