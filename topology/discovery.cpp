#include "topology/discovery.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include "base/device/cuda.hpp"
#include "base/error.hpp"
#include "topology/nvml.hpp"

namespace loom::topo {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;
using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

Topology load(const std::string& xmlFile, const std::string& what) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throwSystemError("hwloc_topology_init", errno);
  Topology topology(raw);
  // Everything on the PCI tree: switch ports and NVSwitches are not among
  // hwloc's "important" devices, and without them the paths are wrong.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  // On Linux the core reads PCI devices from sysfs itself; the libpciaccess
  // plugin finds the same ones (checked here) but leaks at every load, and
  // the OpenCL and GL plugins probe drivers for OS devices Loom never reads.
  for (const char* plugin : {"pci", "opencl", "gl"}) {
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
  }
  if (!xmlFile.empty()) {
    if (std::ifstream probe(xmlFile); !probe) {
      throw Error(loomInvalidArgument, what + ": cannot open '" + xmlFile + "': " + std::strerror(errno));
    }
    if (hwloc_topology_set_xml(raw, xmlFile.c_str()) != 0) {
      throw Error(loomInvalidArgument, what + ": '" + xmlFile + "' is not an hwloc XML topology: " + std::strerror(errno));
    }
  }
  if (hwloc_topology_load(raw) != 0) {
    throw Error(loomInvalidArgument, (xmlFile.empty() ? std::string("hwloc discovery") : what + ": '" + xmlFile + "'") +
                                         " failed to load: " + std::strerror(errno));
  }
  return topology;
}

std::string busIdOf(const PciAttr& pci) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", pci.domain, pci.bus, pci.dev, pci.func);
  return text;
}

std::string vendorDevice(const PciAttr& pci) {
  char text[16];
  std::snprintf(text, sizeof text, "%04x:%04x", pci.vendor_id, pci.device_id);
  return text;
}

bool isGpu(const PciAttr& pci) {
  constexpr unsigned kNvidia = 0x10de, kAmd = 0x1002;
  if (pci.class_id == 0x0302) return true;  // 3D controller: data-center GPUs
  // VGA: only real GPU vendors; a server's BMC display is VGA too.
  return pci.class_id == 0x0300 && (pci.vendor_id == kNvidia || pci.vendor_id == kAmd);
}

bool isNic(const PciAttr& pci) {
  return pci.class_id == 0x0200 || pci.class_id == 0x0207;  // Ethernet, InfiniBand
}

bool isNvSwitch(const PciAttr& pci) { return pci.class_id == 0x0680 && pci.vendor_id == 0x10de; }

double pcieGBs(float linkspeed) { return linkspeed > 0 ? static_cast<double>(linkspeed) : LinkModel::kPcieDefault; }

// A live NIC's port speed from sysfs, in Gbit/s; 0 when no file says.
double liveSpeedGbps(const std::vector<std::string>& netdevs) {
  for (const auto& dev : netdevs) {
    if (std::ifstream rate("/sys/class/infiniband/" + dev + "/ports/1/rate"); rate) {
      double gbps = 0;
      if (rate >> gbps && gbps > 0) return gbps;  // "400 Gb/sec (4X NDR)"
    }
    if (std::ifstream speed("/sys/class/net/" + dev + "/speed"); speed) {
      long mbps = 0;
      if (speed >> mbps && mbps > 0) return static_cast<double>(mbps) / 1000.0;
    }
  }
  return 0;
}

class Builder {
 public:
  Builder(hwloc_topology_t t, bool thisMachine) : t_(t) { sys_.thisMachine = thisMachine; }

  System build() {
    hwloc_obj_t root = hwloc_get_root_obj(t_);
    if (const char* host = hwloc_obj_get_info_by_name(root, "HostName")) sys_.hostname = host;
    addCpus();
    for (hwloc_obj_t b = hwloc_get_next_bridge(t_, nullptr); b; b = hwloc_get_next_bridge(t_, b)) {
      if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) addHostBridge(b);
    }
    addNvLinks();
    if (sys_.thisMachine && sys_.nvlinks.empty()) addNvLinksFromNvml();
    numberByBusId(NodeKind::PciSwitch, "switch");
    numberByBusId(NodeKind::Gpu, "gpu");
    numberByBusId(NodeKind::NvSwitch, "nvswitch");
    numberByBusId(NodeKind::Nic, "");
    return std::move(sys_);
  }

 private:
  void addCpus() {
    for (hwloc_obj_t numa = hwloc_get_next_obj_by_type(t_, HWLOC_OBJ_NUMANODE, nullptr); numa;
         numa = hwloc_get_next_obj_by_type(t_, HWLOC_OBJ_NUMANODE, numa)) {
      Node n;
      n.kind = NodeKind::Cpu;
      n.index = static_cast<int>(numa->os_index);
      n.name = "cpu" + std::to_string(n.index);
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t_, HWLOC_OBJ_PACKAGE, numa);
      n.package = pkg ? static_cast<int>(pkg->os_index) : 0;
      if (pkg) {
        if (const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel")) n.model = model;
      }
      for (int pu = hwloc_bitmap_first(numa->cpuset); pu >= 0; pu = hwloc_bitmap_next(numa->cpuset, pu)) n.pus.push_back(pu);
      n.cpu = static_cast<int>(sys_.nodes.size());
      cpuByNuma_[numa->os_index] = n.cpu;
      sys_.nodes.push_back(std::move(n));
    }
  }

  // The CPU node local to an I/O subtree: the first NUMA node of the closest
  // normal object. I/O hung on the machine itself means the locality is hidden.
  int cpuFor(hwloc_obj_t io) {
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(t_, io);
    unsigned first = static_cast<unsigned>(std::max(0, hwloc_bitmap_first(anchor->nodeset)));
    auto it = cpuByNuma_.find(first);
    int cpu = it != cpuByNuma_.end() ? it->second : 0;
    if (anchor->type == HWLOC_OBJ_MACHINE && hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_PACKAGE) > 0 && !notedHidden_) {
      notedHidden_ = true;
      sys_.notes.push_back("PCI devices hang off the whole machine, not a socket (a VM hiding PCI locality?): "
                           "they are placed on " + sys_.nodes[static_cast<size_t>(cpu)].name);
    }
    return cpu;
  }

  void addHostBridge(hwloc_obj_t hostBridge) {
    const int cpu = cpuFor(hostBridge);
    // Root ports belong to the CPU: their children hang off it directly.
    for (hwloc_obj_t c = hostBridge->io_first_child; c; c = c->next_sibling) {
      if (c->type == HWLOC_OBJ_BRIDGE) {
        for (hwloc_obj_t d = c->io_first_child; d; d = d->next_sibling) visit(d, cpu, cpu, nullptr);
      } else {
        visit(c, cpu, cpu, nullptr);
      }
    }
  }

  // `parent` is the graph node above `obj`; `upstream` the hwloc bridge that
  // is the upstream port of the switch `parent`, when parent is a switch.
  void visit(hwloc_obj_t obj, int parent, int cpu, hwloc_obj_t upstream) {
    if (obj->type == HWLOC_OBJ_BRIDGE) {
      const auto& pci = obj->attr->bridge.upstream.pci;
      const bool downstreamPort =
          upstream && vendorDevice(upstream->attr->bridge.upstream.pci) == vendorDevice(pci) && obj->parent == upstream;
      if (downstreamPort) {
        // A port of the switch above: its devices hang off that switch.
        for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) visit(c, parent, cpu, nullptr);
        return;
      }
      Node n;
      n.kind = NodeKind::PciSwitch;
      n.busId = busIdOf(pci);
      n.model = vendorDevice(pci);
      n.parent = parent;
      n.cpu = cpu;
      n.linkGBs = pcieGBs(pci.linkspeed);
      const int self = add(std::move(n), obj);
      for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) visit(c, self, cpu, obj);
      return;
    }
    if (obj->type != HWLOC_OBJ_PCI_DEVICE) return;
    const auto& pci = obj->attr->pcidev;
    Node n;
    n.busId = busIdOf(pci);
    n.model = vendorDevice(pci);
    n.parent = parent;
    n.cpu = cpu;
    n.linkGBs = pcieGBs(pci.linkspeed);
    if (isGpu(pci)) {
      n.kind = NodeKind::Gpu;
    } else if (isNvSwitch(pci)) {
      n.kind = NodeKind::NvSwitch;
    } else if (isNic(pci)) {
      n.kind = NodeKind::Nic;
      // Verbs devices first: they name the NIC the way operators know it.
      for (int pass = 0; pass < 2; ++pass) {
        for (hwloc_obj_t os = obj->io_first_child; os; os = os->next_sibling) {
          if (os->type != HWLOC_OBJ_OS_DEVICE || !os->name) continue;
          const auto type = os->attr->osdev.type;
          if ((pass == 0 && type == HWLOC_OBJ_OSDEV_OPENFABRICS) || (pass == 1 && type == HWLOC_OBJ_OSDEV_NETWORK)) {
            n.netdevs.emplace_back(os->name);
          }
        }
      }
      n.name = n.netdevs.empty() ? "" : n.netdevs.front();
      if (sys_.thisMachine) n.speedGbps = liveSpeedGbps(n.netdevs);
    } else {
      return;
    }
    const int self = add(std::move(n), obj);
    for (hwloc_obj_t os = obj->io_first_child; os; os = os->next_sibling) nodeOf_[os] = self;
  }

  int add(Node n, hwloc_obj_t obj) {
    const int index = static_cast<int>(sys_.nodes.size());
    sys_.nodes.push_back(std::move(n));
    nodeOf_[obj] = index;
    return index;
  }

  // NVLinks from the matrix hwloc's NVML backend exports (MB/s per pair).
  // Without hwloc's NVML backend, from NVML itself (nvml.hpp).
  void addNvLinksFromNvml() {
    std::vector<std::string> gpus;
    for (const Node& n : sys_.nodes) {
      if (n.kind == NodeKind::Gpu) gpus.push_back(n.busId);
    }
    sys_.nvlinks = nvLinksFromPorts(sys_, queryNvLinks(gpus));
  }

  void addNvLinks() {
    unsigned nr = 1;
    hwloc_distances_s* d = nullptr;
    if (hwloc_distances_get_by_name(t_, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0) return;
    struct Release {
      hwloc_topology_t t;
      hwloc_distances_s* d;
      ~Release() { hwloc_distances_release(t, d); }
    } release{t_, d};
    for (unsigned i = 0; i < d->nbobjs; ++i) {
      for (unsigned j = i + 1; j < d->nbobjs; ++j) {
        const uint64_t mbs = d->values[i * d->nbobjs + j];
        auto a = nodeOf_.find(d->objs[i]);
        auto b = nodeOf_.find(d->objs[j]);
        if (mbs == 0 || a == nodeOf_.end() || b == nodeOf_.end()) continue;
        const double gbs = static_cast<double>(mbs) / 1000.0;
        sys_.nvlinks.push_back({a->second, b->second, static_cast<int>(gbs / LinkModel::kNvLinkPerLink + 0.5), gbs});
      }
    }
  }

  // Devices of one kind are numbered by PCI bus id, the order nvidia-smi and
  // CUDA_DEVICE_ORDER=PCI_BUS_ID use.
  void numberByBusId(NodeKind kind, const std::string& prefix) {
    std::vector<int> of;
    for (int i = 0; i < static_cast<int>(sys_.nodes.size()); ++i) {
      if (sys_.nodes[static_cast<size_t>(i)].kind == kind) of.push_back(i);
    }
    std::stable_sort(of.begin(), of.end(), [&](int a, int b) {
      return sys_.nodes[static_cast<size_t>(a)].busId < sys_.nodes[static_cast<size_t>(b)].busId;
    });
    for (size_t k = 0; k < of.size(); ++k) {
      Node& n = sys_.nodes[static_cast<size_t>(of[k])];
      n.index = static_cast<int>(k);
      if (n.name.empty()) n.name = (prefix.empty() ? "nic" : prefix) + std::to_string(k);
    }
  }

  hwloc_topology_t t_;
  System sys_;
  std::map<unsigned, int> cpuByNuma_;
  std::map<hwloc_obj_t, int> nodeOf_;
  bool notedHidden_ = false;
};

}  // namespace

System discover(const std::string& xmlFile, const std::string& what) {
  Topology topology = load(xmlFile, what);
  System sys = Builder(topology.get(), xmlFile.empty()).build();
  if (sys.thisMachine) sys.cudaDevices = matchCudaDevices(sys, cuda::visibleDeviceBusIds());
  return sys;
}

}  // namespace loom::topo
