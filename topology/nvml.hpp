// NVLink connectivity from NVIDIA's management library (NVML), for an hwloc
// without its NVML backend (Debian's has none). libnvidia-ml.so.1 comes with
// the driver, so it is loaded at run time, never linked: a machine without
// it (or without GPUs) simply has no NVLinks to report.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topology/system.hpp"

namespace loom::topo {

// One active NVLink of a GPU, as NVML reports it.
struct NvLinkPort {
  std::string gpuBusId;     // the GPU's, as hwloc spells it: 0000:1a:00.0
  std::string remoteBusId;  // the other end: a GPU or an NVSwitch
};

// Every active NVLink of the GPUs with these bus ids; empty when NVML is not
// there or answers nothing.
std::vector<NvLinkPort> queryNvLinks(std::span<const std::string> gpuBusIds);

// The graph's NVLinks from `ports`: links counted per (GPU, GPU or NVSwitch)
// pair, GPU pairs once however many ends report them; ends not in `sys` are
// left out.
std::vector<NvLink> nvLinksFromPorts(const System& sys, std::span<const NvLinkPort> ports);

}  // namespace loom::topo
