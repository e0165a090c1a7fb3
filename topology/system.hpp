// The system graph of one machine: CPUs (one node per NUMA node), PCIe
// switches, GPUs, NICs and NVSwitches, joined by PCIe links up a tree towards
// the CPUs, by the inter-socket link between CPUs, and by NVLinks. A plain
// value built by discovery (from hwloc) and read by paths and placement, so
// everything above it can be tested on machines we do not have.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::topo {

enum class NodeKind { Cpu, PciSwitch, Gpu, Nic, NvSwitch };

std::string_view kindName(NodeKind kind);

struct Node {
  NodeKind kind = NodeKind::Cpu;
  std::string name;     // cpu0, gpu3, mlx5_2 (or the netdev name), switch0, nvswitch1
  std::string busId;    // PCI devices and switches: 0000:1a:00.0
  std::string model;    // CPU model, or the PCI vendor:device
  int parent = -1;      // PCI devices and switches: the switch or CPU above; CPUs: -1
  int cpu = -1;         // the CPU node it hangs off (its own index for CPUs)
  int index = -1;       // rank among nodes of its kind (gpu3 has index 3); CPUs: NUMA os index
  int package = -1;     // CPUs: the socket
  double linkGBs = 0;   // the link to `parent`: PCIe bandwidth in GB/s (one direction)
  double speedGbps = 0; // NICs: port speed, 0 when unknown
  std::vector<int> pus;       // CPUs: the OS indexes of its processing units
  std::vector<std::string> netdevs;  // NICs: every OS device name (mlx5_0, ibp12s0)
};

// An NVLink connection: `links` links of `GBs` in total per direction, from a
// GPU to a GPU or an NVSwitch.
struct NvLink {
  int a = -1;
  int b = -1;
  int links = 0;
  double GBs = 0;
};

// The bandwidths the graph assumes where the machine does not say (one
// direction, GB/s), and the one-way latency each link adds (µs, assumed
// orders of magnitude for ranking paths, not measurements). PCIe links carry
// hwloc's link speed when known.
struct LinkModel {
  static constexpr double kPcieLinkUs = 0.25;       // per PCIe link crossed (a switch hop is two)
  static constexpr double kNvLinkUs = 0.5;          // per NVLink crossed (through an NVSwitch: two)
  static constexpr double kSamePackageUs = 0.1;     // between NUMA nodes of one socket
  static constexpr double kInterSocketUs = 0.3;     // across the socket link
  static constexpr double kPcieDefault = 12.0;      // PCIe link of unknown speed (Gen3 x16, after overhead)
  static constexpr double kSamePackage = 40.0;      // between NUMA nodes of one socket
  static constexpr double kInterSocket = 20.0;      // one UPI/xGMI link set between sockets
  static constexpr double kNvLinkPerLink = 25.0;    // hwloc's NVLinkBandwidth unit (NVLink 2-4)
  static constexpr double kNetDefaultGbps = 10.0;   // a NIC whose speed nobody reports
};

// A CUDA device of this process, by its ordinal, and the graph's GPU with
// its PCI bus id.
struct CudaDevice {
  int ordinal = -1;
  std::string busId;
  int gpu = -1;  // the GPU's index (gpu3: 3), -1 when the graph has none with that bus id
};

struct System {
  std::string hostname;
  bool thisMachine = false;        // discovered live, not loaded from a file
  std::vector<Node> nodes;
  std::vector<NvLink> nvlinks;
  std::vector<std::string> notes;  // what discovery could not see, one line each
  // This machine's only: the CUDA devices the discovering process sees,
  // which CUDA_VISIBLE_DEVICES may number in another order than the GPUs.
  std::vector<CudaDevice> cudaDevices;

  const Node& node(int i) const { return nodes[static_cast<size_t>(i)]; }  // by node index
  std::vector<int> all(NodeKind kind) const;  // node indexes of that kind, by index
  int count(NodeKind kind) const;
  int find(NodeKind kind, int index) const;   // the node of that kind and index, or -1
  // The NUMA node whose processing units include `pu`, or -1.
  int cpuOfPu(int pu) const;
  // The GPU node with PCI bus id `busId` (hwloc's spelling), or -1.
  int gpuWithBusId(const std::string& busId) const;
};

// CUDA's devices, by ordinal, with the PCI bus ids in `busIds`, matched to
// the graph's GPUs.
std::vector<CudaDevice> matchCudaDevices(const System& sys, std::span<const std::string> busIds);

}  // namespace loom::topo
