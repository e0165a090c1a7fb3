#include "topology/placement.hpp"

#include <sched.h>

#include <algorithm>
#include <bit>
#include <tuple>

#include "topology/paths.hpp"

namespace loom::topo {
namespace {

RankPlace onCpu(const System& sys, int cpu) {
  RankPlace p;
  if (cpu >= 0) {
    p.numa = sys.node(cpu).index;
    p.package = sys.node(cpu).package;
  }
  return p;
}

// The in-order binary tree over positions 1..n: node x = m * 2^k (m odd) has
// children x - 2^(k-1) and x + 2^(k-1), the right one pulled in while it is
// past n. Odd positions are the leaves; the root is the largest power of two.
Tree inOrderTree(int n) {
  Tree t;
  t.parent.assign(static_cast<size_t>(n), -1);
  t.children.assign(static_cast<size_t>(n), {});
  t.root = static_cast<int>(std::bit_floor(static_cast<unsigned>(n))) - 1;
  for (int x = 1; x <= n; ++x) {
    const int low = x & -x;
    for (int step = low / 2, side = 0; side < 2; ++side, step = low / 2) {
      int child = side == 0 ? x - step : x + step;
      while (side == 1 && step > 0 && child > n) {
        step /= 2;
        child = x + step;
      }
      if (step == 0) continue;
      t.children[static_cast<size_t>(x - 1)].push_back(child - 1);
      t.parent[static_cast<size_t>(child - 1)] = x - 1;
    }
  }
  return t;
}

// The tree in which node i sits where node position(i) sits in `t`.
Tree relabel(const Tree& t, int n, auto position) {
  std::vector<int> nodeAt(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) nodeAt[static_cast<size_t>(position(i))] = i;
  Tree out;
  out.root = nodeAt[static_cast<size_t>(t.root)];
  out.parent.assign(static_cast<size_t>(n), -1);
  out.children.assign(static_cast<size_t>(n), {});
  for (int i = 0; i < n; ++i) {
    const int p = position(i);
    const int parentPos = t.parent[static_cast<size_t>(p)];
    out.parent[static_cast<size_t>(i)] = parentPos < 0 ? -1 : nodeAt[static_cast<size_t>(parentPos)];
    for (int c : t.children[static_cast<size_t>(p)]) out.children[static_cast<size_t>(i)].push_back(nodeAt[static_cast<size_t>(c)]);
  }
  return out;
}

RankPlace onGpu(const System& sys, int gpu) {
  RankPlace p = onCpu(sys, sys.node(gpu).cpu);
  p.gpu = sys.node(gpu).index;
  return p;
}

// Local ranks spread over the NUMA nodes in blocks, as launchers bind them.
RankPlace onCpusInBlocks(const System& sys, int localRank, int localSize) {
  const std::vector<int> cpus = sys.all(NodeKind::Cpu);
  if (cpus.empty() || localSize <= 0) return {};
  const size_t block = static_cast<size_t>(localRank) * cpus.size() / static_cast<size_t>(localSize);
  return onCpu(sys, cpus[std::min(block, cpus.size() - 1)]);
}

}  // namespace

RankPlace placeByLocalRank(const System& sys, int localRank, int localSize) {
  const std::vector<int> gpus = sys.all(NodeKind::Gpu);
  if (!gpus.empty()) return onGpu(sys, gpus[static_cast<size_t>(localRank) % gpus.size()]);
  return onCpusInBlocks(sys, localRank, localSize);
}

RankPlace placeThisProcess(const System& sys, int localRank, int localSize, const std::string& gpuBusId) {
  if (const int g = sys.gpuWithBusId(gpuBusId); g >= 0) return onGpu(sys, g);
  // A described machine is not this one: its ranks are placed as launched.
  if (!sys.thisMachine) return placeByLocalRank(sys, localRank, localSize);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int cpu = -1;
    bool oneNode = true;
    for (int pu = 0; pu < CPU_SETSIZE && oneNode; ++pu) {
      if (!CPU_ISSET(pu, &set)) continue;
      const int c = sys.cpuOfPu(pu);
      oneNode = cpu < 0 || c == cpu;
      cpu = c;
    }
    if (oneNode && cpu >= 0) return onCpu(sys, cpu);
  }
  // Live and unpinned: no GPU is invented for a rank that has none.
  return onCpusInBlocks(sys, localRank, localSize);
}

std::vector<int> cpusFor(const System& sys, const RankPlace& place, std::span<const int> allowed) {
  std::vector<int> cpus;
  const int cpu = place.numa >= 0 ? sys.find(NodeKind::Cpu, place.numa) : -1;
  if (!sys.thisMachine || cpu < 0) return cpus;
  for (int pu : sys.node(cpu).pus) {
    if (std::find(allowed.begin(), allowed.end(), pu) != allowed.end()) cpus.push_back(pu);
  }
  return cpus;
}

void chooseNics(const System& sys, std::span<RankPlace> local) {
  const std::vector<int> nics = sys.all(NodeKind::Nic);
  std::vector<int> load(nics.size(), 0);
  for (RankPlace& r : local) {
    const int from = r.gpu >= 0 ? sys.find(NodeKind::Gpu, r.gpu) : sys.find(NodeKind::Cpu, r.numa);
    if (from < 0 || nics.empty()) continue;
    size_t best = 0;
    auto key = [&](size_t k) {
      const Path p = pathBetween(sys, from, nics[k]);
      return std::make_tuple(p.type, -p.GBs, load[k], k);
    };
    for (size_t k = 1; k < nics.size(); ++k) {
      if (key(k) < key(best)) best = k;
    }
    ++load[best];
    r.nic = sys.node(nics[best]).index;
    r.nicName = sys.node(nics[best]).name;
  }
}

std::array<Tree, 2> doubleBinaryTrees(int n) {
  if (n <= 0) return {};
  const Tree t0 = inOrderTree(n);
  // Even n: the mirror turns the leaves (even positions) into inner nodes
  // (odd ones). Odd n: mirroring keeps parity, shifting by one flips it.
  const Tree t1 = n % 2 == 0 ? relabel(t0, n, [n](int i) { return n - 1 - i; })
                             : relabel(t0, n, [n](int i) { return (i + 1) % n; });
  return {t0, t1};
}

Placement plan(std::vector<RankPlace> places) {
  Placement out;
  out.ranks = std::move(places);
  for (size_t r = 0; r < out.ranks.size(); ++r) {
    auto it = std::find(out.hosts.begin(), out.hosts.end(), out.ranks[r].host);
    if (it == out.hosts.end()) {
      out.hosts.push_back(out.ranks[r].host);
      out.hostRanks.emplace_back();
      it = out.hosts.end() - 1;
    }
    out.hostRanks[static_cast<size_t>(it - out.hosts.begin())].push_back(static_cast<int>(r));
  }
  for (auto& ranks : out.hostRanks) {
    std::vector<int> sorted = ranks;
    std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) {
      const RankPlace& pa = out.ranks[static_cast<size_t>(a)];
      const RankPlace& pb = out.ranks[static_cast<size_t>(b)];
      return std::tie(pa.package, pa.numa, pa.gpu) < std::tie(pb.package, pb.numa, pb.gpu);
    });
    out.ring.insert(out.ring.end(), sorted.begin(), sorted.end());
  }
  out.trees = doubleBinaryTrees(static_cast<int>(out.hosts.size()));
  return out;
}

Placement planLayout(const System& sys, int nodes, int ranksPerNode) {
  std::vector<RankPlace> places;
  for (int node = 0; node < nodes; ++node) {
    const size_t first = places.size();
    for (int local = 0; local < ranksPerNode; ++local) {
      RankPlace p = placeByLocalRank(sys, local, ranksPerNode);
      p.rank = static_cast<int>(places.size());
      p.host = static_cast<uint64_t>(node);
      places.push_back(p);
    }
    chooseNics(sys, std::span(places).subspan(first));
  }
  return plan(std::move(places));
}

}  // namespace loom::topo
