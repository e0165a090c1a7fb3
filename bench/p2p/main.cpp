// loom-bench-p2p: point-to-point latency and bandwidth between two ranks over
// each transport, measured side by side with the limits of the same path in
// the same run: single-thread memcpy (the bound for shared memory) and one raw
// TCP stream between the same two ranks (the bound for sockets).
//
// For every size the contenders run in turn, round after round, and each
// figure is the median over the rounds, so that drift on a shared machine
// hits them all alike.
//   latency: one-way time, half the median round trip of a ping-pong
//   bandwidth: a stream of messages from rank 0 to rank 1 closed by an ack
#include <loom/loom.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/env.hpp"
#include "base/net/interfaces.hpp"
#include "base/net/socket.hpp"
#include "tools/launch/local_job.hpp"
#include "transport/socket/socket_transport.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  size_t minBytes = 8;
  size_t maxBytes = size_t{256} << 20;
  int rounds = 5;
};

int rank = -1;

void check(loomResult_t r, const char* what) {
  if (r == loomSuccess) return;
  std::fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, what, loomGetErrorString(r), loomGetLastError(nullptr));
  std::exit(1);
}

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Two ranks joined by something that moves bytes.
struct Path {
  std::function<void(std::byte*, size_t)> send;
  std::function<void(std::byte*, size_t)> recv;
};

Path loomPath(loomComm_t comm) {
  return {[comm](std::byte* p, size_t n) { check(loomSend(p, n, loomUint8, 1 - rank, comm, nullptr), "loomSend"); },
          [comm](std::byte* p, size_t n) { check(loomRecv(p, n, loomUint8, 1 - rank, comm, nullptr), "loomRecv"); }};
}

Path tcpPath(loom::net::Socket& s) {
  auto deadline = [] { return loom::Deadline::after(std::chrono::seconds(60)); };
  return {[&s, deadline](std::byte* p, size_t n) { s.sendAll({p, n}, deadline(), nullptr); },
          [&s, deadline](std::byte* p, size_t n) { s.recvAll({p, n}, deadline(), nullptr); }};
}

// One-way latency in µs: half a round trip, averaged over `iters`.
double latencyUs(Path& path, std::byte* buffer, size_t bytes, int iters) {
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      path.send(buffer, bytes);
      path.recv(buffer, bytes);
    } else {
      path.recv(buffer, bytes);
      path.send(buffer, bytes);
    }
  }
  return seconds(t0) * 1e6 / (2.0 * iters);
}

// GB/s of `iters` messages streamed from rank 0 to rank 1, closed by a 1-byte ack.
double bandwidthGBps(Path& path, std::byte* buffer, size_t bytes, int iters) {
  std::byte ack{0};
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) rank == 0 ? path.send(buffer, bytes) : path.recv(buffer, bytes);
  rank == 0 ? path.recv(&ack, 1) : path.send(&ack, 1);
  return static_cast<double>(bytes) * iters / seconds(t0) / 1e9;
}

double memcpyGBps(std::byte* dst, const std::byte* src, size_t bytes, int iters) {
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    std::memcpy(dst, src, bytes);
    asm volatile("" : : "r"(dst) : "memory");  // keep every copy
  }
  return static_cast<double>(bytes) * iters / seconds(t0) / 1e9;
}

// A communicator over all ranks whose connections use `transport`.
loomComm_t commOver(loomComm_t world, const char* transport) {
  loomComm_t comm = nullptr;
  check(loomCommSplit(world, 0, rank, &comm, nullptr), "loomCommSplit");
  ::setenv("LOOM_TRANSPORT", transport, 1);  // read when the first connection is made
  std::byte b{0};
  Path p = loomPath(comm);
  latencyUs(p, &b, 1, 1);
  ::unsetenv("LOOM_TRANSPORT");
  return comm;
}

// One raw TCP stream between the ranks, on the interface Loom would use.
loom::net::Socket rawTcp(loomComm_t world) {
  char address[128] = {};
  if (rank == 1) {
    auto interfaces = loom::net::selectInterfaces(loom::env::get("LOOM_SOCKET_IFNAME"), loom::net::listInterfaces());
    auto at = interfaces.front().address;
    at.setPort(0);
    auto listener = loom::net::Socket::listen(at, "raw tcp listener");
    std::snprintf(address, sizeof address, "%s", listener.localAddress().toString().c_str());
    check(loomSend(address, sizeof address, loomUint8, 0, world, nullptr), "loomSend");
    auto s = listener.accept(loom::Deadline::after(std::chrono::seconds(30)), nullptr);
    loom::transport::sock::configureDataSocket(s);
    return s;
  }
  check(loomRecv(address, sizeof address, loomUint8, 1, world, nullptr), "loomRecv");
  auto s = loom::net::Socket::connect(loom::net::SocketAddress::parse(address), loom::Deadline::after(std::chrono::seconds(30)),
                                      nullptr, "rank 1");
  loom::transport::sock::configureDataSocket(s);
  return s;
}

int runRank(const Options& o) {
  loomComm_t world = nullptr;
  check(loomCommInitFromEnv(&world, nullptr), "loomCommInitFromEnv");
  int size = 0, localCount = 0;
  check(loomCommUserRank(world, &rank), "loomCommUserRank");
  check(loomCommCount(world, &size), "loomCommCount");
  check(loomCommLocalCount(world, &localCount), "loomCommLocalCount");
  if (size != 2) {
    std::fprintf(stderr, "loom-bench-p2p needs exactly 2 ranks, not %d\n", size);
    return 2;
  }
  const bool sameHost = localCount == 2;
  struct Contender {
    const char* name;
    loomComm_t comm;
  };
  std::vector<Contender> loomContenders;
  if (sameHost) loomContenders.push_back({"shm", commOver(world, "shm")});
  loomContenders.push_back({"socket", commOver(world, "socket")});
  auto tcp = rawTcp(world);
  Path tcpP = tcpPath(tcp);

  std::vector<std::byte> a(o.maxBytes, std::byte{1}), b(o.maxBytes, std::byte{2});
  if (rank == 0) {
    std::printf("# loom-bench-p2p %d.%d.%d: 2 ranks on %s; medians of %d rounds, contenders alternating\n", LOOM_MAJOR,
                LOOM_MINOR, LOOM_PATCH, sameHost ? "one host" : "two hosts", o.rounds);
    std::printf("# memcpy: one thread on rank 0; tcp: one raw TCP stream between the same ranks (4 MiB buffers)\n");
    std::printf("# lat: one-way latency (us), bw: GB/s (1e9 B/s)\n");
    std::printf("%11s %9s", "bytes", "memcpy_bw");
    for (const auto& c : loomContenders) std::printf(" %9s_lat %9s_bw", c.name, c.name);
    std::printf(" %9s %9s", "tcp_lat", "tcp_bw");
    if (sameHost) std::printf(" %10s", "shm/memcpy");
    std::printf(" %10s\n", "sock/tcp");
  }
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= (bytes < 4096 ? 8 : 4)) {
    // About 0.2 s of traffic per measurement at 1 GB/s; small sizes are latency-bound.
    const int bwIters = static_cast<int>(std::clamp<size_t>((size_t{200} << 20) / bytes, 2, 2000));
    const int latIters = bytes <= (64 << 10) ? 500 : 0;
    std::vector<double> memcpyBw;
    std::vector<std::vector<double>> lat(loomContenders.size() + 1), bw(loomContenders.size() + 1);
    for (int round = 0; round < o.rounds; ++round) {
      if (rank == 0) memcpyBw.push_back(memcpyGBps(b.data(), a.data(), bytes, bwIters));
      check(loomCommBarrier(world), "loomCommBarrier");
      for (size_t c = 0; c <= loomContenders.size(); ++c) {
        Path p = c < loomContenders.size() ? loomPath(loomContenders[c].comm) : tcpP;
        if (latIters > 0) lat[c].push_back(latencyUs(p, a.data(), bytes, latIters));
        bw[c].push_back(bandwidthGBps(p, a.data(), bytes, bwIters));
      }
    }
    if (rank != 0) continue;
    std::printf("%11zu %9.2f", bytes, median(memcpyBw));
    for (size_t c = 0; c <= loomContenders.size(); ++c) {
      if (latIters > 0) std::printf(" %13.2f", median(lat[c]));
      else std::printf(" %13s", "-");
      std::printf(" %12.3f", median(bw[c]));
    }
    if (sameHost) std::printf(" %9.0f%%", 100 * median(bw[0]) / median(memcpyBw));
    std::printf(" %9.0f%%\n", 100 * median(bw[loomContenders.size() - 1]) / median(bw[loomContenders.size()]));
    std::fflush(stdout);
  }
  for (auto& c : loomContenders) check(loomCommDestroy(c.comm), "loomCommDestroy");
  check(loomCommDestroy(world), "loomCommDestroy");
  return 0;
}

size_t parseBytes(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  size_t scale = *end == 'K' ? 1 << 10 : *end == 'M' ? 1 << 20 : *end == 'G' ? 1 << 30 : 1;
  if (v < 1 || (scale == 1 && *end != '\0')) {
    std::fprintf(stderr, "loom-bench-p2p: '%s' is not a size (e.g. 8, 64K, 256M)\n", text);
    std::exit(2);
  }
  return static_cast<size_t>(v * static_cast<double>(scale));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-b" && i + 1 < argc) o.minBytes = parseBytes(argv[++i]);
    else if (a == "-e" && i + 1 < argc) o.maxBytes = parseBytes(argv[++i]);
    else if (a == "-r" && i + 1 < argc) o.rounds = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(a == "-h" ? stdout : stderr,
                   "usage: loom-bench-p2p [-b min bytes (8)] [-e max bytes (256M)] [-r rounds (5)]\n"
                   "  Runs as 2 local ranks when started by hand, or as the ranks of a launcher.\n");
      return a == "-h" ? 0 : 2;
    }
  }
  if (loom::launch::launchedAsRank()) return runRank(o);
  return loom::launch::relaunchAsLocalJob(2, argc, argv);
}
