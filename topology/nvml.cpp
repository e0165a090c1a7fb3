#include "topology/nvml.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <utility>

#include "base/bus_id.hpp"

namespace loom::topo {
namespace {

// The few NVML declarations used, from NVIDIA's API reference (nvml.h is not
// part of every CUDA toolkit, and NVML is optional here).
using NvmlReturn = int;  // NVML_SUCCESS = 0
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
};
constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (H100); fewer on older GPUs, which answer an error
constexpr int kEnabled = 1;         // NVML_FEATURE_ENABLED

class Nvml {
 public:
  Nvml() {
    lib_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    init_ = reinterpret_cast<NvmlReturn (*)()>(::dlsym(lib_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<NvmlReturn (*)()>(::dlsym(lib_, "nvmlShutdown"));
    byBusId_ = reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(::dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    state_ = reinterpret_cast<NvmlReturn (*)(NvmlDevice, unsigned, int*)>(::dlsym(lib_, "nvmlDeviceGetNvLinkState"));
    remote_ = reinterpret_cast<NvmlReturn (*)(NvmlDevice, unsigned, NvmlPciInfo*)>(
        ::dlsym(lib_, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    ready_ = init_ && shutdown_ && byBusId_ && state_ && remote_ && init_() == 0;
  }
  ~Nvml() {
    if (ready_) shutdown_();
    if (lib_ != nullptr) ::dlclose(lib_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  void linksOf(const std::string& gpuBusId, std::vector<NvLinkPort>& out) const {
    NvmlDevice device = nullptr;
    if (!ready_ || byBusId_(gpuBusId.c_str(), &device) != 0) return;
    for (unsigned link = 0; link < kMaxLinks; ++link) {
      int active = 0;
      NvmlPciInfo pci{};
      if (state_(device, link, &active) != 0 || active != kEnabled || remote_(device, link, &pci) != 0) continue;
      pci.busId[sizeof pci.busId - 1] = '\0';
      if (auto remote = normalizeBusId(pci.busId); !remote.empty()) out.push_back({gpuBusId, remote});
    }
  }

 private:
  void* lib_ = nullptr;
  bool ready_ = false;
  NvmlReturn (*init_)() = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  NvmlReturn (*byBusId_)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*state_)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*remote_)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
};

}  // namespace

std::vector<NvLinkPort> queryNvLinks(std::span<const std::string> gpuBusIds) {
  std::vector<NvLinkPort> ports;
  if (gpuBusIds.empty()) return ports;
  const Nvml nvml;
  for (const auto& busId : gpuBusIds) nvml.linksOf(busId, ports);
  return ports;
}

std::vector<NvLink> nvLinksFromPorts(const System& sys, std::span<const NvLinkPort> ports) {
  auto nodeWith = [&](const std::string& busId) {
    for (size_t i = 0; i < sys.nodes.size(); ++i) {
      const Node& n = sys.nodes[i];
      if ((n.kind == NodeKind::Gpu || n.kind == NodeKind::NvSwitch) && n.busId == busId) return static_cast<int>(i);
    }
    return -1;
  };
  std::map<std::pair<int, int>, int> count;
  for (const auto& port : ports) {
    const int gpu = nodeWith(port.gpuBusId);
    const int remote = nodeWith(port.remoteBusId);
    if (gpu < 0 || remote < 0 || gpu == remote) continue;
    // A GPU-to-GPU link is reported by both GPUs: count it from the lower node only.
    if (sys.nodes[static_cast<size_t>(remote)].kind == NodeKind::Gpu && remote < gpu) continue;
    ++count[{gpu, remote}];
  }
  std::vector<NvLink> links;
  for (const auto& [pair, n] : count) links.push_back({pair.first, pair.second, n, n * LinkModel::kNvLinkPerLink});
  return links;
}

}  // namespace loom::topo
