#include "tools/loom-diag/measure.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include "tools/loom-diag/statistics.hpp"


namespace loom::diag {

void must(loomResult_t r, const char* call, loomComm_t comm) {
  if (r != loomSuccess) throw Failure{std::string(call) + ": " + loomGetErrorString(r) + " (" + loomGetLastError(comm) + ")"};
}

namespace {

using Clock = std::chrono::steady_clock;

void send(const void* p, size_t bytes, int peer, loomComm_t comm) {
  must(loomSend(p, bytes, loomInt8, peer, comm, nullptr), "loomSend", comm);
}

void recv(void* p, size_t bytes, int peer, loomComm_t comm) {
  must(loomRecv(p, bytes, loomInt8, peer, comm, nullptr), "loomRecv", comm);
}

// `from` sends `iters` messages to `to`, which answers each with one byte:
// the sender's clock covers each message to its arrival. GB/s at the
// sender, the median of the messages': on a shared machine a burst of other
// load slows a message or two of a healthy link, and the mean of a stream
// follows its slowest; a slow link, or a rank short of CPU, slows most of
// them. (The fastest message would hide a rank held to a tenth of a CPU in
// 1 ms slices: some messages fit in one.)
double oneWay(loomComm_t comm, int rank, int from, int to, std::vector<std::byte>& buffer, const Options& o) {
  std::byte ack{};
  const auto message = [&] {
    if (rank == from) {
      send(buffer.data(), buffer.size(), to, comm);
      recv(&ack, 1, to, comm);
    } else {
      recv(buffer.data(), buffer.size(), from, comm);
      send(&ack, 1, from, comm);
    }
  };
  for (int i = 0; i < o.warmup; ++i) message();
  std::vector<double> rates;
  for (int i = 0; i < o.iters; ++i) {
    const auto start = Clock::now();
    message();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(static_cast<double>(buffer.size()) / seconds / 1e9);
  }
  return rank == from ? percentile(rates, 0.5) : 0;
}

// Both ranks send `iters` messages and receive as many at once (a group per
// message): the GB/s of both directions together, as this rank saw it.
double bothWays(loomComm_t comm, int peer, std::vector<std::byte>& out, std::vector<std::byte>& in, const Options& o) {
  const auto exchange = [&](int count) {
    for (int i = 0; i < count; ++i) {
      must(loomGroupStart(), "loomGroupStart", comm);
      send(out.data(), out.size(), peer, comm);
      recv(in.data(), in.size(), peer, comm);
      must(loomGroupEnd(), "loomGroupEnd", comm);
    }
  };
  exchange(o.warmup);
  const auto start = Clock::now();
  exchange(o.iters);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return 2.0 * static_cast<double>(out.size()) * o.iters / seconds / 1e9;
}


// Round trips of 8 bytes started by the lower rank; half of each, in µs.
void latency(loomComm_t comm, int rank, int low, int high, const Options& o, Row& row) {
  char word[8] = {};
  const int peer = rank == low ? high : low;
  std::vector<double> halves;
  halves.reserve(static_cast<size_t>(o.latencyIters));
  for (int i = 0; i < o.latencyIters + 5; ++i) {  // five to warm up
    const auto start = Clock::now();
    if (rank == low) {
      send(word, sizeof word, peer, comm);
      recv(word, sizeof word, peer, comm);
    } else {
      recv(word, sizeof word, peer, comm);
      send(word, sizeof word, peer, comm);
    }
    if (i >= 5) halves.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / 2);
  }
  if (rank != low) return;
  row.latencyP50Us[static_cast<size_t>(peer)] = percentile(halves, 0.5);
  row.latencyP99Us[static_cast<size_t>(peer)] = percentile(halves, 0.99);
}

}  // namespace

Row measure(loomComm_t comm, int rank, int size, const std::vector<Round>& rounds, const Options& o,
            void (*onRound)(int round, int rounds)) {
  const auto n = static_cast<size_t>(size);
  Row row{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  std::vector<std::byte> buffer(o.bytes), incoming(o.bytes);
  for (size_t r = 0; r < rounds.size(); ++r) {
    if (onRound != nullptr) onRound(static_cast<int>(r), static_cast<int>(rounds.size()));
    const int peer = partnerIn(rounds[r], rank);
    if (peer >= 0) {
      const int low = std::min(rank, peer), high = std::max(rank, peer);
      const double lowToHigh = oneWay(comm, rank, low, high, buffer, o);
      const double highToLow = oneWay(comm, rank, high, low, buffer, o);
      row.bandwidthGBps[static_cast<size_t>(peer)] = rank == low ? lowToHigh : highToLow;
      row.bidirectionalGBps[static_cast<size_t>(peer)] = bothWays(comm, peer, buffer, incoming, o);
      latency(comm, rank, low, high, o, row);
    }
    must(loomCommBarrier(comm), "loomCommBarrier", comm);
  }
  return row;
}

}  // namespace loom::diag
