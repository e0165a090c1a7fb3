#include "tools/loom-diag/health_check.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>
#include "tools/loom-diag/statistics.hpp"

namespace loom::diag {
namespace {

std::string figure(double v, Metric metric) {
  char text[48];
  std::snprintf(text, sizeof text, "%.3g %s", v, metricUnit(metric));
  return text;
}

// The ranks a collective scope ran on.
std::vector<int> ranksOf(const HealthResult& h, std::span<const int> hostOf) {
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(hostOf.size()); ++r) {
    const int host = hostOf[static_cast<size_t>(r)];
    if (h.kind == Scope::Job || (h.kind == Scope::Node && host == h.node) || (h.kind == Scope::AcrossNodes && host == r)) {
      ranks.push_back(r);
    }
  }
  return ranks;
}

// Each scope's and collective's figure at the largest size measured.
std::vector<const HealthResult*> atLargest(std::span<const HealthResult> health) {
  std::map<std::pair<std::string, std::string>, const HealthResult*> largest;
  for (const HealthResult& h : health) {
    const HealthResult*& at = largest[{h.scope, h.collective}];
    if (at == nullptr || h.bytes > at->bytes) at = &h;
  }
  std::vector<const HealthResult*> out;
  for (const auto& [key, h] : largest) out.push_back(h);
  return out;
}

}  // namespace

std::vector<Finding> floorFindings(std::span<const PairResult> pairs, std::span<const HealthResult> health,
                                   std::span<const int> hostOf, const Expectations& expect) {
  std::vector<Finding> out;
  const auto pairName = [](const PairResult& p) {
    return "rank " + std::to_string(p.from) + " -> " + std::to_string(p.to);
  };
  if (expect.pairGBps > 0) {
    for (const PairResult& p : pairs) {
      if (p.bandwidthGBps >= expect.pairGBps) continue;
      out.push_back({.kind = "floor",
                     .metric = Metric::Bandwidth,
                     .ranks = {p.from, p.to},
                     .measured = p.bandwidthGBps,
                     .against = expect.pairGBps,
                     .detail = pairName(p) + " moves " + figure(p.bandwidthGBps, Metric::Bandwidth) +
                               ", below --expect-pair-bw " + figure(expect.pairGBps, Metric::Bandwidth)});
    }
  }
  if (expect.latencyUs > 0) {
    for (const PairResult& p : pairs) {
      // Latency is measured once per unordered pair: name it once.
      if (p.from > p.to || p.latencyP50Us <= expect.latencyUs) continue;
      out.push_back({.kind = "floor",
                     .metric = Metric::Latency,
                     .ranks = {p.from, p.to},
                     .measured = p.latencyP50Us,
                     .against = expect.latencyUs,
                     .detail = "ranks " + std::to_string(p.from) + " and " + std::to_string(p.to) + " answer in " +
                               figure(p.latencyP50Us, Metric::Latency) + " (p50), above --expect-latency " +
                               figure(expect.latencyUs, Metric::Latency)});
    }
  }
  if (expect.busbwGBps > 0) {
    for (const HealthResult* h : atLargest(health)) {
      if (h->busbwGBps >= expect.busbwGBps) continue;
      out.push_back({.kind = "floor",
                     .metric = Metric::Busbw,
                     .ranks = ranksOf(*h, hostOf),
                     .measured = h->busbwGBps,
                     .against = expect.busbwGBps,
                     .detail = h->collective + " of " + std::to_string(h->bytes) + " B in " + h->scope + " reaches " +
                               figure(h->busbwGBps, Metric::Busbw) + " busbw, below --expect-busbw " +
                               figure(expect.busbwGBps, Metric::Busbw)});
    }
  }
  return out;
}

std::vector<Finding> collectiveFindings(std::span<const HealthResult> health, std::span<const int> hostOf,
                                        const Thresholds& thresholds, std::span<const Finding> named) {
  std::map<std::string, std::vector<const HealthResult*>> nodesBy;  // per collective, each node's largest
  for (const HealthResult* h : atLargest(health)) {
    if (h->kind == Scope::Node) nodesBy[h->collective].push_back(h);
  }
  std::map<int, Finding> slowest;  // per node, its worst shortfall
  for (const auto& [collective, nodes] : nodesBy) {
    if (nodes.size() < 3) continue;  // a median of two says nothing of which is slow
    std::vector<double> figures;
    for (const HealthResult* h : nodes) figures.push_back(h->busbwGBps);
    const double m = median(figures);
    for (const HealthResult* h : nodes) {
      if (h->busbwGBps >= m * (1 - thresholds.minDrop)) continue;
      Finding& f = slowest[h->node];
      if (!f.kind.empty() && h->busbwGBps / m >= f.measured / f.against) continue;
      f = {.kind = "node",
           .metric = Metric::Busbw,
           .ranks = ranksOf(*h, hostOf),
           .measured = h->busbwGBps,
           .against = m,
           .detail = "the node's own " + h->collective + " reaches " + figure(h->busbwGBps, Metric::Busbw) +
                     " busbw against a median of the nodes of " + figure(m, Metric::Busbw)};
    }
  }
  std::vector<Finding> out;
  for (auto& entry : slowest) {
    Finding& f = entry.second;  // a plain reference: Clang 14 cannot capture a structured binding
    const bool already = std::any_of(named.begin(), named.end(), [&](const Finding& g) {
      return (g.kind == "node" || g.kind == "rank") && std::includes(f.ranks.begin(), f.ranks.end(), g.ranks.begin(), g.ranks.end());
    });
    if (!already) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace loom::diag
