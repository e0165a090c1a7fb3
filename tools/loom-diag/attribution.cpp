#include "tools/loom-diag/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace loom::diag {
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string gbps(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GB/s", v);
  return text;
}

}  // namespace

Attribution attribute(std::span<const PairResult> pairs, std::span<const int> hostOf, const Thresholds& t) {
  Attribution a;
  a.slow.assign(pairs.size(), false);
  std::map<std::string, std::vector<size_t>> byPath;
  for (size_t i = 0; i < pairs.size(); ++i) byPath[pairs[i].path].push_back(i);

  for (const auto& [path, members] : byPath) {
    std::vector<double> bw;
    for (size_t i : members) bw.push_back(pairs[i].bandwidthGBps);
    PathStats stats{.path = path, .pairs = static_cast<int>(members.size()), .medianGBps = median(bw)};
    const auto ln = [](double v) { return std::log(std::max(v, 1e-12)); };
    const double center = ln(stats.medianGBps);
    std::vector<double> deviations;
    for (double v : bw) deviations.push_back(std::fabs(ln(v) - center));
    stats.madLog = 1.4826 * median(deviations);
    const bool useMad = members.size() >= 5;
    for (size_t i : members) {
      const double v = pairs[i].bandwidthGBps;
      const bool belowShare = v < stats.medianGBps * (1 - t.minDrop);
      const bool belowSpread = !useMad || ln(v) < center - t.madK * stats.madLog;
      a.slow[i] = belowShare && belowSpread;
    }
    a.paths.push_back(stats);
  }
  const auto medianOf = [&](const std::string& path) {
    for (const auto& p : a.paths) {
      if (p.path == path) return p.medianGBps;
    }
    return 0.0;
  };

  // Ranks: most of what one sends, or most of what one receives, slow.
  const int n = static_cast<int>(hostOf.size());
  std::vector<int> outSlow(static_cast<size_t>(n)), outAll(static_cast<size_t>(n));
  std::vector<int> inSlow(static_cast<size_t>(n)), inAll(static_cast<size_t>(n));
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto from = static_cast<size_t>(pairs[i].from), to = static_cast<size_t>(pairs[i].to);
    ++outAll[from];
    ++inAll[to];
    if (a.slow[i]) ++outSlow[from], ++inSlow[to];
  }
  const auto mostly = [](int slow, int all) { return slow >= 2 && 2 * slow > all; };
  std::vector<bool> slowSender(static_cast<size_t>(n)), slowReceiver(static_cast<size_t>(n));
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
    slowSender[r] = mostly(outSlow[r], outAll[r]);
    slowReceiver[r] = mostly(inSlow[r], inAll[r]);
  }
  const auto rankSlow = [&](int r) { return slowSender[static_cast<size_t>(r)] || slowReceiver[static_cast<size_t>(r)]; };
  // The slowest of a rank's slow pairs, and its path's median, for the report.
  const auto worst = [&](int r, Finding& f) {
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (!a.slow[i] || (pairs[i].from != r && pairs[i].to != r)) continue;
      if (f.measuredGBps == 0 || pairs[i].bandwidthGBps < f.measuredGBps) {
        f.measuredGBps = pairs[i].bandwidthGBps;
        f.medianGBps = medianOf(pairs[i].path);
      }
    }
  };

  // Nodes: every one of two or more ranks slow.
  std::map<int, std::vector<int>> hosts;
  for (int r = 0; r < n; ++r) hosts[hostOf[static_cast<size_t>(r)]].push_back(r);
  std::vector<bool> reported(static_cast<size_t>(n));
  for (const auto& [host, ranks] : hosts) {
    if (ranks.size() < 2 || !std::all_of(ranks.begin(), ranks.end(), rankSlow)) continue;
    Finding f;
    f.kind = "node";
    f.ranks = ranks;
    for (int r : ranks) worst(r, f), reported[static_cast<size_t>(r)] = true;
    f.detail = "every rank of the node is slow";
    a.findings.push_back(f);
  }
  for (int r = 0; r < n; ++r) {
    if (!rankSlow(r) || reported[static_cast<size_t>(r)]) continue;
    Finding f;
    f.kind = "rank";
    f.ranks = {r};
    worst(r, f);
    const size_t i = static_cast<size_t>(r);
    f.detail = std::string("rank ") + std::to_string(r) + " is slow " +
               (slowSender[i] && slowReceiver[i] ? "both ways" : slowSender[i] ? "sending" : "receiving") + " (" +
               std::to_string(slowSender[i] ? outSlow[i] : inSlow[i]) + " of " +
               std::to_string(slowSender[i] ? outAll[i] : inAll[i]) + " pairs)";
    a.findings.push_back(f);
  }

  // Links: slow pairs that no slow rank explains.
  for (size_t i = 0; i < pairs.size(); ++i) {
    const PairResult& p = pairs[i];
    if (!a.slow[i] || slowSender[static_cast<size_t>(p.from)] || slowReceiver[static_cast<size_t>(p.to)]) continue;
    const double m = medianOf(p.path);
    a.findings.push_back({.kind = "link",
                          .ranks = {p.from, p.to},
                          .measuredGBps = p.bandwidthGBps,
                          .medianGBps = m,
                          .detail = "rank " + std::to_string(p.from) + " -> " + std::to_string(p.to) + " moves " +
                                    gbps(p.bandwidthGBps) + " against a " + p.path + " median of " + gbps(m)});
  }

  // Health check: the floor every pair must reach.
  if (t.expectPairGBps > 0) {
    for (const PairResult& p : pairs) {
      if (p.bandwidthGBps >= t.expectPairGBps) continue;
      a.findings.push_back({.kind = "floor",
                            .ranks = {p.from, p.to},
                            .measuredGBps = p.bandwidthGBps,
                            .medianGBps = t.expectPairGBps,
                            .detail = "rank " + std::to_string(p.from) + " -> " + std::to_string(p.to) + " moves " +
                                      gbps(p.bandwidthGBps) + ", below --expect-pair-bw " + gbps(t.expectPairGBps)});
    }
  }
  return a;
}

}  // namespace loom::diag
