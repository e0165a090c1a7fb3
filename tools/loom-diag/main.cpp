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
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tools/launch/local_job.hpp"
#include "tools/loom-diag/attribution.hpp"
#include "tools/loom-diag/gpu.hpp"
#include "tools/loom-diag/health.hpp"
#include "tools/loom-diag/measure.hpp"
#include "tools/loom-diag/options.hpp"
#include "tools/loom-diag/report.hpp"
#include "tools/loom-diag/schedule.hpp"

namespace {

using namespace loom::diag;

constexpr size_t kTransportName = sizeof(loomPeerInfo_t{}.transport);
constexpr size_t kEntry = 5;  // gathered per round: peer, one way, both ways, p50, p99

void progress(int round, int rounds) {
  if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\rloom-diag: round %d of %d", round + 1, rounds);
}

// What every rank measured, one entry per round (its peer in it, or -1),
// with the transport to that peer and the rank's host key, gathered at every
// rank: O(rounds) per rank, so the sampled schedule of a large job stays small.
struct Gathered {
  size_t rounds = 0;
  std::vector<double> entries;   // rank-major, per round: peer, bandwidth, both ways, p50, p99
  std::vector<char> transports;  // rank-major, per round: kTransportName bytes
  std::vector<int> hostKeys;
};

Gathered gather(loomComm_t comm, int rank, int n, const std::vector<Round>& rounds, const Row& row) {
  const size_t perRank = rounds.size();
  Gathered g{perRank, std::vector<double>(kEntry * perRank * static_cast<size_t>(n)),
             std::vector<char>(perRank * static_cast<size_t>(n) * kTransportName), std::vector<int>(static_cast<size_t>(n))};
  std::vector<double> mine(kEntry * perRank, -1.0);
  std::vector<char> names(perRank * kTransportName, '\0');
  for (size_t r = 0; r < perRank; ++r) {
    const int peer = partnerIn(rounds[r], rank);
    if (peer < 0) continue;
    const auto p = static_cast<size_t>(peer);
    double* e = &mine[kEntry * r];
    e[0] = peer;
    e[1] = row.bandwidthGBps[p];
    e[2] = row.bidirectionalGBps[p];
    e[3] = row.latencyP50Us[p];
    e[4] = row.latencyP99Us[p];
    loomPeerInfo_t info;
    must(loomCommGetPeerInfo(comm, peer, &info), "loomCommGetPeerInfo", comm);
    std::memcpy(names.data() + r * kTransportName, info.transport, kTransportName);
  }
  int hostKey = rank;
  for (int peer = 0; peer < rank; ++peer) {
    loomPeerInfo_t info;
    must(loomCommGetPeerInfo(comm, peer, &info), "loomCommGetPeerInfo", comm);
    if (info.sameHost) {
      hostKey = peer;
      break;
    }
  }
  must(loomAllGather(mine.data(), g.entries.data(), mine.size(), loomFloat64, comm, nullptr), "loomAllGather", comm);
  must(loomAllGather(names.data(), g.transports.data(), names.size(), loomInt8, comm, nullptr), "loomAllGather", comm);
  must(loomAllGather(&hostKey, g.hostKeys.data(), 1, loomInt32, comm, nullptr), "loomAllGather", comm);
  return g;
}

// Rank and host of every rank, for the report; also on a communicator
// revoked by a failure.
std::vector<RankInfo> rankInfos(loomComm_t comm, int n, const std::vector<int>& hostKeys) {
  std::vector<RankInfo> ranks;
  for (int r = 0; r < n; ++r) {
    loomPeerInfo_t info;
    must(loomCommGetPeerInfo(comm, r, &info), "loomCommGetPeerInfo", comm);
    ranks.push_back({.host = info.host, .pid = info.pid, .hostKey = hostKeys.empty() ? -1 : hostKeys[static_cast<size_t>(r)]});
  }
  return ranks;
}

Diagnosis assemble(loomComm_t comm, int n, const Gathered& g, const Options& o) {
  Diagnosis d;
  d.ranks = rankInfos(comm, n, g.hostKeys);
  // Both ways and latency: the lower rank's figures, for both directions.
  struct Shared {
    double bidirectional, p50, p99;
  };
  std::map<std::pair<int, int>, Shared> shared;
  for (int a = 0; a < n; ++a) {
    for (size_t r = 0; r < g.rounds; ++r) {
      const double* e = &g.entries[kEntry * (static_cast<size_t>(a) * g.rounds + r)];
      if (e[0] >= 0 && a < static_cast<int>(e[0])) shared[{a, static_cast<int>(e[0])}] = {e[2], e[3], e[4]};
    }
  }
  for (int a = 0; a < n; ++a) {
    for (size_t r = 0; r < g.rounds; ++r) {
      const size_t at = static_cast<size_t>(a) * g.rounds + r;
      const double* e = &g.entries[kEntry * at];
      if (e[0] < 0) continue;
      const int b = static_cast<int>(e[0]);
      const char* name = g.transports.data() + at * kTransportName;
      const Shared both = shared[{std::min(a, b), std::max(a, b)}];
      d.pairs.push_back({.from = a,
                         .to = b,
                         .path = std::string(name, strnlen(name, kTransportName)),
                         .bandwidthGBps = e[1],
                         .bidirectionalGBps = both.bidirectional,
                         .latencyP50Us = both.p50,
                         .latencyP99Us = both.p99});
    }
  }
  std::sort(d.pairs.begin(), d.pairs.end(),
            [](const PairResult& x, const PairResult& y) { return std::pair(x.from, x.to) < std::pair(y.from, y.to); });
  d.attribution = attribute(d.pairs, g.hostKeys, o.thresholds);
  return d;
}

// How many times, at most, the pairs found slow are measured again.
constexpr int kConfirmations = 3;

// Up to this many pairs, the first confirmation measures every pair again,
// alone, not only the slow ones. Pairs of one round share the CPUs, and a
// slow pair leaves its round's other pair the whole machine: on CI's 2-vCPU
// machine, with rank 3's egress held to 400 Mbit/s, 1 -> 0 moved 5.0 GB/s
// beside 3 -> 2 and 0 -> 1 1.3 GB/s beside 2 -> 3, enough to make rank 2's
// healthy pairs (1.1-1.5 GB/s) look slow against the others. Figures all
// measured alone are measured alike; a small job's pairs take a second.
constexpr size_t kAloneEveryPair = 28;  // 8 ranks

// One round per unordered pair that a slow figure touches (with `every`,
// one per measured pair).
std::vector<Round> confirmRounds(const Diagnosis& d, bool every) {
  std::set<Pair> pairs;
  for (size_t i = 0; i < d.pairs.size(); ++i) {
    if (every || d.attribution.slow[i])
      pairs.insert({std::min(d.pairs[i].from, d.pairs[i].to), std::max(d.pairs[i].from, d.pairs[i].to)});
  }
  std::vector<Round> rounds;
  for (const Pair& p : pairs) rounds.push_back({p});
  return rounds;
}

// Takes each re-measured pair's figure (`replace`: the new one, measured
// alike with every other; else the better of the two) and attributes again;
// returns how many ordered pairs are still slow.
int remeasured(Diagnosis& d, const Diagnosis& again, bool replace, const Options& o) {
  for (const PairResult& second : again.pairs) {
    for (PairResult& first : d.pairs) {
      if (first.from == second.from && first.to == second.to) {
        first.bandwidthGBps = replace ? second.bandwidthGBps : std::max(first.bandwidthGBps, second.bandwidthGBps);
      }
    }
  }
  std::vector<int> hostKeys;
  for (const RankInfo& r : d.ranks) hostKeys.push_back(r.hostKey);
  d.attribution = attribute(d.pairs, hostKeys, o.thresholds);
  return static_cast<int>(std::count(d.attribution.slow.begin(), d.attribution.slow.end(), true));
}

// --json, --csv, --heatmap and --html (both drawn from the JSON, kept beside
// the picture without --json).
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
  if (!o.heatmapFile.empty() || !o.htmlFile.empty()) {
    const std::string png = o.heatmapFile.empty() ? o.htmlFile + ".png" : o.heatmapFile;
    std::string json = o.jsonFile;
    if (json.empty()) {
      json = png + ".json";
      ok = write(json, jsonReport(d, o), "the heatmap's JSON") && ok;
    }
    std::fflush(stdout);
    ok = heatmap(json, png, o.htmlFile) == 0 && ok;
  }
  return ok;
}

// After a failure: the ranks the watchdog declared failed (a call may meet
// the dead connection before its notice comes: up to two seconds), a "dead"
// finding naming them, reported by the lowest rank still alive (terminal and
// --json; the pairs measured before the failure are lost with it).
void reportDead(loomComm_t comm, int rank, int n, const Options& o, const std::string& what) {
  std::vector<int> failed(static_cast<size_t>(n));
  int count = 0;
  for (int i = 0; i < 200 && count == 0; ++i) {
    if (loomCommGetFailedRanks(comm, failed.data(), n, &count) != loomSuccess) {
      std::fprintf(stderr, "loom-diag: rank %d: loomCommGetFailedRanks: %s\n", rank, loomGetLastError(comm));
      return;
    }
    if (count == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  failed.resize(static_cast<size_t>(std::min(count, n)));
  int reporter = 0;
  while (std::find(failed.begin(), failed.end(), reporter) != failed.end()) ++reporter;
  if (rank != reporter) return;
  Diagnosis d;
  try {
    d.ranks = rankInfos(comm, n, {});
  } catch (const Failure& f) {
    std::fprintf(stderr, "loom-diag: rank %d: %s\n", rank, f.what.c_str());
    return;
  }
  std::string names;
  for (int r : failed) names += (names.empty() ? "rank " : ", rank ") + std::to_string(r);
  d.attribution.findings.push_back({.kind = "dead",
                                    .metric = Metric::None,
                                    .ranks = failed,
                                    .detail = (names.empty() ? std::string("a rank") : names) +
                                              " failed or stopped answering: " + what});
  std::fputs(terminalReport(d, o).c_str(), stdout);
  Options jsonOnly = o;  // nothing measured to draw or tabulate
  jsonOnly.csvFile.clear();
  jsonOnly.heatmapFile.clear();
  jsonOnly.htmlFile.clear();
  writeFiles(d, jsonOnly);
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
    // Every rank computes the same schedule (a fixed seed).
    const long long pairs = static_cast<long long>(n) * (n - 1) / 2;
    const auto rounds = pairs <= o.maxPairs ? roundRobin(n) : sampledRounds(n, 2, 1);
    const Row row = measure(comm, rank, n, rounds, o, rank == 0 ? progress : nullptr);
    const Gathered g = gather(comm, rank, n, rounds, row);
    // Every rank holds the same gathered figures, so every rank finds the
    // same slow pairs; each is measured again, alone, and keeps the better
    // figure, up to kConfirmations times while any is still slow: someone
    // else's load on a shared machine (a burst, or a vCPU placed far for a
    // few seconds) slows a round, not a link, and a fault slows the pair
    // every time.
    Diagnosis d = assemble(comm, n, g, o);
    int measuredAgain = 0, passes = 0, stillSlow = 0;
    const bool anySlow = std::find(d.attribution.slow.begin(), d.attribution.slow.end(), true) != d.attribution.slow.end();
    const bool everyPair = anySlow && d.pairs.size() / 2 <= kAloneEveryPair;
    for (auto again = confirmRounds(d, everyPair); !again.empty() && passes < kConfirmations;
         again = confirmRounds(d, false)) {
      const Row second = measure(comm, rank, n, again, o, nullptr);
      const Gathered g2 = gather(comm, rank, n, again, second);
      stillSlow = remeasured(d, assemble(comm, n, g2, o), everyPair && passes == 0, o);
      if (passes++ == 0) measuredAgain = static_cast<int>(again.size());
    }
    Health health;
    if (o.healthBytes > 0) {
      const int hostKey = g.hostKeys[static_cast<size_t>(rank)];
      health = measureHealth(comm, rank, n, hostKey, {std::max<size_t>(o.healthBytes / 16, 4), o.healthBytes}, 5);
    }
    GpuReport gpus;
    if (o.gpuBytes > 0) gpus = measureGpus(comm, rank, n, g.hostKeys[static_cast<size_t>(rank)], o.gpuBytes, 5);
    if (rank == 0) {
      if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
      d.rounds = static_cast<int>(rounds.size());
      d.remeasured = measuredAgain;
      d.confirmPasses = passes;
      d.stillSlow = stillSlow;
      d.health = std::move(health.collectives);
      d.tcp = health.tcp;
      auto& findings = d.attribution.findings;
      const auto nodes = collectiveFindings(d.health, g.hostKeys, o.thresholds, findings);
      findings.insert(findings.end(), nodes.begin(), nodes.end());
      const auto floors = floorFindings(d.pairs, d.health, g.hostKeys, o.expect);
      findings.insert(findings.end(), floors.begin(), floors.end());
      d.gpus = std::move(gpus);
      const auto sickGpus = gpuFindings(d.gpus, o.thresholds);
      findings.insert(findings.end(), sickGpus.begin(), sickGpus.end());
      d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (o.healthBytes > 0) d.memcpyGBps = memcpyGBps();  // the health figures' limit, not timed
      std::fputs(terminalReport(d, o).c_str(), stdout);
      status = d.attribution.findings.empty() ? 0 : 1;
      if (!writeFiles(d, o)) status = 2;
    }
  } catch (const Failure& f) {
    // A rank that died or stopped answering: Loom's words name it.
    std::fprintf(stderr, "loom-diag: rank %d: %s\n", rank, f.what.c_str());
    reportDead(comm, rank, n, o, f.what);
    // A goodbye, not an abort: the call that failed has returned, and an
    // abort would count as this rank failing too, for a survivor still
    // deciding who is the lowest live rank.
    loomCommDestroy(comm);
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
