#include "topology/system.hpp"

#include <algorithm>

namespace loom::topo {

std::string_view kindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::Cpu: return "cpu";
    case NodeKind::PciSwitch: return "pci-switch";
    case NodeKind::Gpu: return "gpu";
    case NodeKind::Nic: return "nic";
    case NodeKind::NvSwitch: return "nvswitch";
  }
  return "?";
}

std::vector<int> System::all(NodeKind kind) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    if (nodes[static_cast<size_t>(i)].kind == kind) out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    return nodes[static_cast<size_t>(a)].index < nodes[static_cast<size_t>(b)].index;
  });
  return out;
}

int System::count(NodeKind kind) const {
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [&](const Node& n) { return n.kind == kind; }));
}

int System::find(NodeKind kind, int index) const {
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const Node& n = nodes[static_cast<size_t>(i)];
    if (n.kind == kind && n.index == index) return i;
  }
  return -1;
}

int System::cpuOfPu(int pu) const {
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const Node& n = nodes[static_cast<size_t>(i)];
    if (n.kind == NodeKind::Cpu && std::find(n.pus.begin(), n.pus.end(), pu) != n.pus.end()) return i;
  }
  return -1;
}

int System::gpuWithBusId(const std::string& busId) const {
  if (busId.empty()) return -1;
  for (int g : all(NodeKind::Gpu)) {
    if (node(g).busId == busId) return g;
  }
  return -1;
}

std::vector<CudaDevice> matchCudaDevices(const System& sys, std::span<const std::string> busIds) {
  std::vector<CudaDevice> devices;
  for (size_t d = 0; d < busIds.size(); ++d) {
    const int g = sys.gpuWithBusId(busIds[d]);
    devices.push_back({static_cast<int>(d), busIds[d], g < 0 ? -1 : sys.node(g).index});
  }
  return devices;
}

}  // namespace loom::topo
