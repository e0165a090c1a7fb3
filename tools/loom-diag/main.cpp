// loom-diag: which link, rank or node of a job is slow. Every ordered pair of
// ranks is measured (one-way bandwidth and 8-byte latency) in rounds of
// disjoint pairs, each pair is held against the median of pairs on the same
// path, and what is slow is named (attribution.hpp). Uses only <loom/loom.h>.
#include <loom/loom.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tools/launch/local_job.hpp"
#include "tools/loom-diag/attribution.hpp"
#include "tools/loom-diag/health.hpp"
#include "tools/loom-diag/measure.hpp"
#include "tools/loom-diag/options.hpp"
#include "tools/loom-diag/report.hpp"
#include "tools/loom-diag/schedule.hpp"

namespace {

using namespace loom::diag;

constexpr size_t kTransportName = sizeof(loomPeerInfo_t{}.transport);

void progress(int round, int rounds) {
  if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\rloom-diag: round %d of %d", round + 1, rounds);
}

void must(loomResult_t r, const char* call, loomComm_t comm) {
  if (r != loomSuccess) throw Failure{std::string(call) + ": " + loomGetErrorString(r) + " (" + loomGetLastError(comm) + ")"};
}

// Every rank's row, transports and host key, gathered at every rank.
struct Gathered {
  std::vector<double> rows;       // rank-major: bandwidth, p50, p99 rows of n each
  std::vector<char> transports;   // rank-major: n names of kTransportName bytes
  std::vector<int> hostKeys;
};

Gathered gather(loomComm_t comm, int rank, int n, const Row& row) {
  const auto un = static_cast<size_t>(n);
  Gathered g{std::vector<double>(3 * un * un), std::vector<char>(un * un * kTransportName), std::vector<int>(un)};
  std::vector<double> mine(3 * un);
  std::copy(row.bandwidthGBps.begin(), row.bandwidthGBps.end(), mine.begin());
  std::copy(row.latencyP50Us.begin(), row.latencyP50Us.end(), mine.begin() + n);
  std::copy(row.latencyP99Us.begin(), row.latencyP99Us.end(), mine.begin() + 2 * n);
  std::vector<char> names(un * kTransportName);
  int hostKey = rank;
  for (int peer = 0; peer < n; ++peer) {
    loomPeerInfo_t info;
    must(loomCommGetPeerInfo(comm, peer, &info), "loomCommGetPeerInfo", comm);
    std::memcpy(names.data() + static_cast<size_t>(peer) * kTransportName, info.transport, kTransportName);
    if (info.sameHost && peer < hostKey) hostKey = peer;
  }
  must(loomAllGather(mine.data(), g.rows.data(), 3 * un, loomFloat64, comm, nullptr), "loomAllGather", comm);
  must(loomAllGather(names.data(), g.transports.data(), names.size(), loomInt8, comm, nullptr), "loomAllGather", comm);
  must(loomAllGather(&hostKey, g.hostKeys.data(), 1, loomInt32, comm, nullptr), "loomAllGather", comm);
  return g;
}

Diagnosis assemble(loomComm_t comm, int n, const Gathered& g, const Options& o) {
  const auto un = static_cast<size_t>(n);
  Diagnosis d;
  for (int r = 0; r < n; ++r) {
    loomPeerInfo_t info;
    must(loomCommGetPeerInfo(comm, r, &info), "loomCommGetPeerInfo", comm);
    d.ranks.push_back({.host = info.host, .pid = info.pid, .hostKey = g.hostKeys[static_cast<size_t>(r)]});
  }
  const auto at = [&](int rank, int part, int peer) {
    return g.rows[static_cast<size_t>(rank) * 3 * un + static_cast<size_t>(part) * un + static_cast<size_t>(peer)];
  };
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const int low = std::min(a, b), high = std::max(a, b);
      const char* name = g.transports.data() + (static_cast<size_t>(a) * un + static_cast<size_t>(b)) * kTransportName;
      d.pairs.push_back({.from = a,
                         .to = b,
                         .path = std::string(name, strnlen(name, kTransportName)),
                         .bandwidthGBps = at(a, 0, b),
                         .latencyP50Us = at(low, 1, high),
                         .latencyP99Us = at(low, 2, high)});
    }
  }
  d.attribution = attribute(d.pairs, g.hostKeys, o.thresholds);
  d.rounds = static_cast<int>(roundRobin(n).size());
  return d;
}

// --json, --csv, --heatmap (drawn from the JSON, a temporary one without --json).
bool writeFiles(const Diagnosis& d, const Options& o) {
  const auto write = [](const std::string& path, const std::string& text, const char* what) {
    std::ofstream out(path);
    out << text;
    if (!out.flush()) {
      std::fprintf(stderr, "loom-diag: cannot write %s to %s\n", what, path.c_str());
      return false;
    }
    std::printf("# %s written to %s\n", what, path.c_str());
    return true;
  };
  bool ok = true;
  if (!o.jsonFile.empty()) ok = write(o.jsonFile, jsonReport(d, o), "JSON") && ok;
  if (!o.csvFile.empty()) ok = write(o.csvFile, csvReport(d), "CSV") && ok;
  if (!o.heatmapFile.empty()) {
    std::string json = o.jsonFile;
    if (json.empty()) {
      json = o.heatmapFile + ".json";
      ok = write(json, jsonReport(d, o), "the heatmap's JSON") && ok;
    }
    std::fflush(stdout);
    ok = heatmap(json, o.heatmapFile) == 0 && ok;
  }
  return ok;
}

int runRank(const Options& o) {
  loomComm_t comm = nullptr;
  if (loomCommInitFromEnv(&comm, nullptr) != loomSuccess) {
    std::fprintf(stderr, "loom-diag: init failed: %s\n", loomGetLastError(nullptr));
    return 3;
  }
  int rank = 0, n = 0;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &n);
  if (n < 2) {
    if (rank == 0) std::fprintf(stderr, "loom-diag: needs at least 2 ranks (got %d)\n", n);
    loomCommDestroy(comm);
    return 2;
  }
  int status = 0;
  try {
    const auto start = std::chrono::steady_clock::now();
    const Row row = measure(comm, rank, n, o, rank == 0 ? progress : nullptr);
    const Gathered g = gather(comm, rank, n, row);
    std::vector<HealthResult> health;
    if (o.healthBytes > 0) {
      const int hostKey = g.hostKeys[static_cast<size_t>(rank)];
      health = measureHealth(comm, rank, n, hostKey, {std::max<size_t>(o.healthBytes / 16, 4), o.healthBytes}, 5);
    }
    if (rank == 0) {
      if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
      Diagnosis d = assemble(comm, n, g, o);
      d.health = std::move(health);
      d.memcpyGBps = memcpyGBps();
      d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fputs(terminalReport(d, o).c_str(), stdout);
      status = d.attribution.findings.empty() ? 0 : 1;
      if (!writeFiles(d, o)) status = 2;
    }
  } catch (const Failure& f) {
    // A rank that died or stopped answering: Loom's words name it.
    std::fprintf(stderr, "loom-diag: rank %d: %s\n", rank, f.what.c_str());
    loomCommAbort(comm);
    return 3;
  }
  loomCommDestroy(comm);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseOptions(argc, argv);
  if (loom::launch::launchedAsRank()) return runRank(o);
  return loom::launch::relaunchAsLocalJob(o.np, argc, argv);
}
