#include "topology/paths.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

namespace loom::topo {
namespace {

// NVLink bandwidth between two nodes, summed over their direct links.
double nvlinkGBs(const System& sys, int a, int b) {
  double total = 0;
  for (const auto& l : sys.nvlinks) {
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) total += l.GBs;
  }
  return total;
}

std::optional<Path> nvlinkPath(const System& sys, int a, int b) {
  const auto isGpu = [&](int i) { return sys.node(i).kind == NodeKind::Gpu; };
  if (!isGpu(a) || !isGpu(b)) return std::nullopt;
  if (double direct = nvlinkGBs(sys, a, b); direct > 0) return Path{PathType::NVL, direct, LinkModel::kNvLinkUs};
  // Through NVSwitches: what both GPUs reach of every switch they share.
  double viaSwitch = 0;
  for (int s : sys.all(NodeKind::NvSwitch)) viaSwitch += std::min(nvlinkGBs(sys, a, s), nvlinkGBs(sys, b, s));
  if (viaSwitch > 0) return Path{PathType::NVL, viaSwitch, 2 * LinkModel::kNvLinkUs};
  double viaGpu = 0;
  for (int g : sys.all(NodeKind::Gpu)) {
    if (g != a && g != b) viaGpu = std::max(viaGpu, std::min(nvlinkGBs(sys, a, g), nvlinkGBs(sys, g, b)));
  }
  if (viaGpu > 0) return Path{PathType::NVB, viaGpu, 2 * LinkModel::kNvLinkUs};
  return std::nullopt;
}

// `i` and its PCI ancestors up to its CPU, nearest first.
std::vector<int> chainUp(const System& sys, int i) {
  std::vector<int> chain{i};
  while (sys.node(chain.back()).parent >= 0) chain.push_back(sys.node(chain.back()).parent);
  return chain;
}

}  // namespace

std::string_view pathName(PathType type) {
  switch (type) {
    case PathType::LOC: return "LOC";
    case PathType::NVL: return "NVL";
    case PathType::NVB: return "NVB";
    case PathType::PIX: return "PIX";
    case PathType::PXB: return "PXB";
    case PathType::PHB: return "PHB";
    case PathType::SYS: return "SYS";
    case PathType::NET: return "NET";
  }
  return "?";
}

Path pathBetween(const System& sys, int a, int b) {
  if (a == b) return {PathType::LOC, 0, 0};
  if (auto nv = nvlinkPath(sys, a, b)) return *nv;

  const std::vector<int> up = chainUp(sys, a);
  const std::vector<int> down = chainUp(sys, b);
  // The narrowest PCIe link from a node of `chain` up to (not above) chain[stop].
  const auto narrowest = [&](const std::vector<int>& chain, size_t stop) {
    double gbs = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < stop; ++k) gbs = std::min(gbs, sys.node(chain[k]).linkGBs);
    return gbs;
  };
  for (size_t i = 0; i < up.size(); ++i) {
    auto j = std::find(down.begin(), down.end(), up[i]);
    if (j == down.end()) continue;
    const size_t jdx = static_cast<size_t>(j - down.begin());
    const double gbs = std::min(narrowest(up, i), narrowest(down, jdx));
    const double us = static_cast<double>(i + jdx) * LinkModel::kPcieLinkUs;
    if (sys.node(up[i]).kind == NodeKind::Cpu) return {PathType::PHB, gbs, us};
    // The switches crossed: the common one and every one below it on either side.
    const auto switches = [&](const std::vector<int>& chain, size_t stop) {
      return std::count_if(chain.begin() + 1, chain.begin() + static_cast<long>(stop),
                           [&](int k) { return sys.node(k).kind == NodeKind::PciSwitch; });
    };
    const long crossed = 1 + switches(up, i) + switches(down, jdx);
    return {crossed == 1 ? PathType::PIX : PathType::PXB, gbs, us};
  }
  // Different CPUs: up to each, then across the link between them.
  const Node& ca = sys.node(up.back());
  const Node& cb = sys.node(down.back());
  const bool samePackage = ca.package == cb.package;
  const double between = samePackage ? LinkModel::kSamePackage : LinkModel::kInterSocket;
  const double us = static_cast<double>(up.size() + down.size() - 2) * LinkModel::kPcieLinkUs +
                    (samePackage ? LinkModel::kSamePackageUs : LinkModel::kInterSocketUs);
  return {PathType::SYS, std::min({narrowest(up, up.size() - 1), narrowest(down, down.size() - 1), between}), us};
}

}  // namespace loom::topo
