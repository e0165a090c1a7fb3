#include "tools/loom-diag/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include "tools/loom-diag/statistics.hpp"

namespace loom::diag {
const char* metricName(Metric metric) {
  constexpr const char* kNames[] = {"bandwidth", "busbw", "latency_p50", ""};
  return kNames[static_cast<int>(metric)];
}

const char* metricUnit(Metric metric) {
  constexpr const char* kUnits[] = {"GB/s", "GB/s", "us", ""};
  return kUnits[static_cast<int>(metric)];
}

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

  // Ranks: most of what one sends, or most of what one receives, slow; or
  // all of its sends (receives), two or more, below their share and slow as
  // a whole against the other ranks'. A rank's pairs are held against the
  // median of its path's pairs that do not touch it: in a small job one
  // rank's pairs are half of all pairs (6 of 12 with 4 ranks), enough to
  // drag the path's own median halfway down to them (CI measured a rank
  // under a CPU quota at 0.18-0.60 of that median, 0.07-0.21 of the others'
  // pairs). A rank's score is the median of those ratios, held against the
  // median of the ranks' scores (and, with five or more, its spread).
  // Requiring every pair of it below its share keeps a noisy pair or a slow
  // link (measured 0.75 of the ranks' median for a rank with one
  // 100-Mbit/s link) from naming its rank.
  const int n = static_cast<int>(hostOf.size());
  // Each (rank, path)'s median once: a sampled schedule of a large job holds
  // tens of thousands of pairs, each asked about several times.
  std::map<std::pair<size_t, std::string>, double> yardsticks;
  const auto yardstick = [&](size_t r, const std::string& path) {
    const auto [at, fresh] = yardsticks.try_emplace({r, path}, 0.0);
    if (fresh) {
      std::vector<double> others;
      for (size_t i : byPath[path]) {
        if (static_cast<size_t>(pairs[i].from) != r && static_cast<size_t>(pairs[i].to) != r)
          others.push_back(pairs[i].bandwidthGBps);
      }
      at->second = others.size() >= 2 ? median(others) : medianOf(path);
    }
    return at->second;
  };
  const auto shareOf = [&](size_t i, size_t r) {
    const double m = yardstick(r, pairs[i].path);
    return m > 0 ? pairs[i].bandwidthGBps / m : 1.0;
  };
  std::vector<std::vector<double>> outRatios(static_cast<size_t>(n)), inRatios(static_cast<size_t>(n));
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto from = static_cast<size_t>(pairs[i].from), to = static_cast<size_t>(pairs[i].to);
    outRatios[from].push_back(shareOf(i, from));
    inRatios[to].push_back(shareOf(i, to));
  }
  const auto slowAmongRanks = [&](const std::vector<std::vector<double>>& ratios) {
    std::vector<double> scores;
    for (const auto& r : ratios) {
      if (!r.empty()) scores.push_back(median(r));
    }
    std::vector<bool> slow(static_cast<size_t>(n), false);
    if (scores.size() < 3) return slow;  // two ranks: each is the other's only yardstick
    const auto ln = [](double v) { return std::log(std::max(v, 1e-12)); };
    const double center = median(scores);
    std::vector<double> deviations;
    for (double v : scores) deviations.push_back(std::fabs(ln(v) - ln(center)));
    const double spread = 1.4826 * median(deviations);
    for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
      const auto& mine = ratios[r];
      if (mine.size() < 2) continue;
      const bool allBelowShare = std::all_of(mine.begin(), mine.end(), [&](double v) { return v < 1 - t.minDrop; });
      const double score = median(mine);
      slow[r] = allBelowShare && score < center * (1 - t.minDrop) &&
                (scores.size() < 5 || ln(score) < ln(center) - t.madK * spread);
    }
    return slow;
  };
  const std::vector<bool> slowSends = slowAmongRanks(outRatios), slowReceives = slowAmongRanks(inRatios);
  // A slow rank's pairs below their share are slow too (drawn, measured again).
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto from = static_cast<size_t>(pairs[i].from), to = static_cast<size_t>(pairs[i].to);
    if ((slowSends[from] && shareOf(i, from) < 1 - t.minDrop) || (slowReceives[to] && shareOf(i, to) < 1 - t.minDrop))
      a.slow[i] = true;
  }
  std::vector<int> outSlow(static_cast<size_t>(n)), outAll(static_cast<size_t>(n));
  std::vector<int> inSlow(static_cast<size_t>(n)), inAll(static_cast<size_t>(n));
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto from = static_cast<size_t>(pairs[i].from), to = static_cast<size_t>(pairs[i].to);
    ++outAll[from];
    ++inAll[to];
    // A pair with a rank whose sends or receives as a whole are slow is that
    // rank's, not the other end's: else a healthy rank with one slow link
    // besides would count as slow.
    if (a.slow[i] && !slowSends[to] && !slowReceives[to]) ++outSlow[from];
    if (a.slow[i] && !slowSends[from] && !slowReceives[from]) ++inSlow[to];
  }
  const auto mostly = [](int slow, int all) { return slow >= 2 && 2 * slow > all; };
  std::vector<bool> slowSender(static_cast<size_t>(n)), slowReceiver(static_cast<size_t>(n));
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
    slowSender[r] = slowSends[r] || mostly(outSlow[r], outAll[r]);
    slowReceiver[r] = slowReceives[r] || mostly(inSlow[r], inAll[r]);
  }
  const auto rankSlow = [&](int r) { return slowSender[static_cast<size_t>(r)] || slowReceiver[static_cast<size_t>(r)]; };
  // The slowest of a rank's slow pairs, and what it was held against, for the report.
  const auto worst = [&](int r, Finding& f) {
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (!a.slow[i] || (pairs[i].from != r && pairs[i].to != r)) continue;
      if (f.measured == 0 || pairs[i].bandwidthGBps < f.measured) {
        f.measured = pairs[i].bandwidthGBps;
        f.against = yardstick(static_cast<size_t>(r), pairs[i].path);
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
    // Slow pairs the other way, too few to call the rank slow that way, are
    // the same rank's (a rank starved of its CPU slows whichever of its
    // transfers fall in the starved moments), not links of their own.
    if (slowSender[i] != slowReceiver[i]) {
      const bool sends = slowReceiver[i];  // the other way
      if (const int other = sends ? outSlow[i] : inSlow[i]; other > 0) {
        f.detail += "; slow too: " + std::to_string(other) + " of its " + std::to_string(sends ? outAll[i] : inAll[i]) +
                    (sends ? " sends" : " receives");
      }
    }
    a.findings.push_back(f);
  }

  // Links: slow pairs that touch no slow rank.
  for (size_t i = 0; i < pairs.size(); ++i) {
    const PairResult& p = pairs[i];
    if (!a.slow[i] || rankSlow(p.from) || rankSlow(p.to)) continue;
    const double m = medianOf(p.path);
    a.findings.push_back({.kind = "link",
                          .metric = Metric::Bandwidth,
                          .ranks = {p.from, p.to},
                          .measured = p.bandwidthGBps,
                          .against = m,
                          .detail = "rank " + std::to_string(p.from) + " -> " + std::to_string(p.to) + " moves " +
                                    gbps(p.bandwidthGBps) + " against a " + p.path + " median of " + gbps(m)});
  }

  return a;
}

}  // namespace loom::diag
