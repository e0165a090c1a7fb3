#include "tools/loom-diag/health.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "tools/loom-diag/measure.hpp"
#include "tools/loom-diag/tcp_stream.hpp"

namespace loom::diag {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kCollectives[] = {"all_reduce", "all_gather"};

// busbw of one collective of `bytes` per rank on `comm`, the slowest rank's
// time (every rank of `comm` gets the same figure).
double busbw(loomComm_t comm, int collective, size_t bytes, int iters) {
  int n = 0;
  must(loomCommCount(comm, &n), "loomCommCount", comm);
  const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  const size_t outCount = collective == 0 ? count : count * static_cast<size_t>(n);
  std::vector<float> in(count, 1.0f), out(outCount);
  const auto run = [&] {
    if (collective == 0) must(loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comm, nullptr), "loomAllReduce", comm);
    else must(loomAllGather(in.data(), out.data(), count, loomFloat32, comm, nullptr), "loomAllGather", comm);
  };
  run();  // warm-up: connections, segments
  must(loomCommBarrier(comm), "loomCommBarrier", comm);
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) run();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count() / iters;
  must(loomAllReduce(&seconds, &seconds, 1, loomFloat64, loomMax, comm, nullptr), "loomAllReduce", comm);
  const double moved = static_cast<double>(count * sizeof(float)) * (collective == 0 ? 1 : n);
  const double factor = collective == 0 ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
  return moved / seconds / 1e9 * factor;
}

}  // namespace

double memcpyGBps() {
  constexpr size_t kBytes = 64u << 20;
  std::vector<char> from(kBytes, 1), to(kBytes);
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto start = Clock::now();
    std::memcpy(to.data(), from.data(), kBytes);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, static_cast<double>(kBytes) / s / 1e9);
  }
  return best;
}

Health measureHealth(loomComm_t comm, int rank, int size, int hostKey, const std::vector<size_t>& sizes, int iters) {
  // A node's ranks, and the first rank of each node, on communicators of their own.
  loomComm_t node = nullptr, across = nullptr;
  must(loomCommSplit(comm, hostKey, rank, &node, nullptr), "loomCommSplit", comm);
  const bool leader = hostKey == rank;
  must(loomCommSplit(comm, leader ? 0 : LOOM_SPLIT_NOCOLOR, rank, &across, nullptr), "loomCommSplit", comm);
  int nodeRanks = 0, nodes = 0;
  must(loomCommCount(node, &nodeRanks), "loomCommCount", node);
  const int me[2] = {nodeRanks, leader ? 1 : 0};
  std::vector<int> everyone(2 * static_cast<size_t>(size));
  must(loomAllGather(me, everyone.data(), 2, loomInt32, comm, nullptr), "loomAllGather", comm);
  for (int r = 0; r < size; ++r) nodes += everyone[2 * static_cast<size_t>(r) + 1];

  // Per scope and collective and size, this rank's figure (leaders' for
  // their node); last, the raw TCP stream's (at its receiver).
  const size_t perScope = 2 * sizes.size();
  std::vector<double> mine(3 * perScope + 1, 0.0);
  for (size_t s = 0; s < sizes.size(); ++s) {
    for (int c = 0; c < 2; ++c) {
      const size_t at = static_cast<size_t>(c) * sizes.size() + s;
      mine[at] = busbw(comm, c, sizes[s], iters);
      if (nodeRanks > 1) {
        const double b = busbw(node, c, sizes[s], iters);
        if (leader) mine[perScope + at] = b;
      }
      if (leader && nodes > 1) mine[2 * perScope + at] = busbw(across, c, sizes[s], iters);
    }
  }
  TcpStream tcp;
  for (int r = 1; r < size && nodes > 1; ++r) {
    if (everyone[2 * static_cast<size_t>(r) + 1] == 1) {  // the first leader of another node
      tcp = {.from = 0, .to = r, .bytes = sizes.back()};
      break;
    }
  }
  if (rank == tcp.from || rank == tcp.to) mine.back() = rawTcpGBps(comm, rank, tcp.from, tcp.to, tcp.bytes, iters);
  std::vector<double> all(mine.size() * static_cast<size_t>(size));
  must(loomAllGather(mine.data(), all.data(), mine.size(), loomFloat64, comm, nullptr), "loomAllGather", comm);
  loomCommDestroy(node);
  if (across != nullptr) loomCommDestroy(across);
  if (rank != 0) return {};
  if (tcp.to >= 0) tcp.GBps = all[static_cast<size_t>(tcp.to) * mine.size() + mine.size() - 1];

  std::vector<HealthResult> out;
  const auto add = [&](const std::string& scope, Scope kind, int ranks, int from, size_t base) {
    for (int c = 0; c < 2; ++c) {
      for (size_t s = 0; s < sizes.size(); ++s) {
        const size_t at = static_cast<size_t>(from) * mine.size() + base + static_cast<size_t>(c) * sizes.size() + s;
        out.push_back({.scope = scope,
                       .kind = kind,
                       .node = kind == Scope::Node ? from : -1,
                       .collective = kCollectives[c],
                       .bytes = sizes[s],
                       .ranks = ranks,
                       .busbwGBps = all[at]});
      }
    }
  };
  add("job", Scope::Job, size, 0, 0);
  for (int r = 0; r < size; ++r) {
    const int ranksThere = everyone[2 * static_cast<size_t>(r)];
    if (everyone[2 * static_cast<size_t>(r) + 1] == 1 && ranksThere > 1) {
      add("node " + std::to_string(r), Scope::Node, ranksThere, r, perScope);
    }
  }
  if (nodes > 1) add("across nodes", Scope::AcrossNodes, nodes, 0, 2 * perScope);
  return {std::move(out), tcp};
}

}  // namespace loom::diag
