// Topology: discovery from hwloc XML machines we wrote (tests/fixtures/topology)
// and from this machine, path types, NIC choice, rings, double binary trees,
// loom-topo, and LOOM_TOPO_FILE / LOOM_TOPO_DUMP_FILE through real ranks.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "base/bus_id.hpp"
#include "base/error.hpp"
#include "tests/support/files.hpp"
#include "tests/support/processes.hpp"
#include "topology/discovery.hpp"
#include "topology/dump.hpp"
#include "topology/nvml.hpp"
#include "topology/paths.hpp"
#include "topology/placement.hpp"

namespace {

using namespace loom::topo;
using loom::test::runProcess;

std::string fixture(const std::string& name) { return LOOM_SOURCE_DIR "/tests/fixtures/topology/" + name; }

const System& machine(const std::string& name) {
  static std::map<std::string, System> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, discover(fixture(name))).first;
  return it->second;
}

int node(const System& sys, const std::string& name) {
  for (size_t i = 0; i < sys.nodes.size(); ++i) {
    if (sys.nodes[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no node " << name;
  return -1;
}

PathType type(const System& sys, const std::string& a, const std::string& b) {
  return pathBetween(sys, node(sys, a), node(sys, b)).type;
}

TEST(TopologyDiscovery, PcieServerHasEightGpusFourSwitchesFourNicsAndNoBmcDisplay) {
  const System& sys = machine("pcie-8gpu.xml");
  EXPECT_FALSE(sys.thisMachine);
  EXPECT_EQ(sys.hostname, "pcie-8gpu");
  EXPECT_EQ(sys.count(NodeKind::Cpu), 2);
  EXPECT_EQ(sys.count(NodeKind::Gpu), 8);  // the ASPEED VGA is not one
  EXPECT_EQ(sys.count(NodeKind::PciSwitch), 4);
  EXPECT_EQ(sys.count(NodeKind::Nic), 4);
  EXPECT_TRUE(sys.nvlinks.empty());
  EXPECT_TRUE(sys.notes.empty());
  const Node& nic = sys.nodes[static_cast<size_t>(node(sys, "mlx5_2"))];
  EXPECT_EQ(nic.netdevs, (std::vector<std::string>{"mlx5_2", "ibp52s0"}));
  EXPECT_EQ(sys.nodes[static_cast<size_t>(nic.cpu)].package, 1);
}

TEST(TopologyDiscovery, DgxReadsNvLinksToTheFourNvSwitches) {
  const System& sys = machine("dgx-h100.xml");
  EXPECT_EQ(sys.count(NodeKind::Gpu), 8);
  EXPECT_EQ(sys.count(NodeKind::NvSwitch), 4);
  EXPECT_EQ(sys.count(NodeKind::Nic), 8);
  ASSERT_EQ(sys.nvlinks.size(), 32u);
  int links = 0;
  for (const auto& l : sys.nvlinks) {
    if (l.a == node(sys, "gpu3") || l.b == node(sys, "gpu3")) links += l.links;
  }
  EXPECT_EQ(links, 18);  // an H100's NVLinks
}

// NVLinks from NVML, for an hwloc without its NVML backend: what NVML would
// report for the DGX fixture (each GPU's 18 links to the four NVSwitches)
// gives the graph hwloc's matrix gave; a GPU pair reported from both ends
// counts once; ends the graph lacks are left out.
TEST(TopologyDiscovery, NvLinksFromNvmlPortsMatchTheMachine) {
  EXPECT_EQ(loom::normalizeBusId("00000000:1A:00.0"), "0000:1a:00.0");
  EXPECT_EQ(loom::normalizeBusId("0000:1a:00.0"), "0000:1a:00.0");
  EXPECT_EQ(loom::normalizeBusId("0000:1a:00.0 "), "");
  EXPECT_EQ(loom::normalizeBusId("1a:00.0"), "");

  const System& dgx = machine("dgx-h100.xml");
  std::vector<NvLinkPort> ports;
  for (const auto& l : dgx.nvlinks) {
    for (int i = 0; i < l.links; ++i) {
      ports.push_back({dgx.nodes[static_cast<size_t>(l.a)].busId, dgx.nodes[static_cast<size_t>(l.b)].busId});
    }
  }
  ports.push_back({dgx.nodes[static_cast<size_t>(node(dgx, "gpu0"))].busId, "0000:ee:00.0"});  // not in the graph
  ASSERT_EQ(ports.size(), 8u * 18u + 1u);
  const auto links = nvLinksFromPorts(dgx, ports);
  ASSERT_EQ(links.size(), dgx.nvlinks.size());
  for (size_t i = 0; i < links.size(); ++i) {
    auto same = [&](const NvLink& l) { return l.a == links[i].a && l.b == links[i].b && l.links == links[i].links; };
    EXPECT_TRUE(std::any_of(dgx.nvlinks.begin(), dgx.nvlinks.end(), same)) << "link " << i;
  }

  const System& pcie = machine("pcie-8gpu.xml");
  const std::string gpu0 = pcie.nodes[static_cast<size_t>(node(pcie, "gpu0"))].busId;
  const std::string gpu1 = pcie.nodes[static_cast<size_t>(node(pcie, "gpu1"))].busId;
  const auto pair = nvLinksFromPorts(pcie, std::vector<NvLinkPort>{{gpu0, gpu1}, {gpu0, gpu1}, {gpu1, gpu0}, {gpu1, gpu0}});
  ASSERT_EQ(pair.size(), 1u);
  EXPECT_EQ(pair[0].links, 2);
  System linked = pcie;
  linked.nvlinks = pair;
  EXPECT_EQ(pathBetween(pcie, node(pcie, "gpu0"), node(pcie, "gpu1")).type, PathType::PIX);
  EXPECT_EQ(pathBetween(linked, node(linked, "gpu0"), node(linked, "gpu1")).type, PathType::NVL);

  // No NVML here, or no GPU with this bus id: nothing, and no error.
  EXPECT_TRUE(queryNvLinks(std::vector<std::string>{"0000:ee:00.0"}).empty());
}

TEST(TopologyDiscovery, CpuOnlyNodeHasTwoNumaNodesPerSocket) {
  const System& sys = machine("cpu-2s4n.xml");
  ASSERT_EQ(sys.count(NodeKind::Cpu), 4);
  std::vector<int> packages;
  for (int c : sys.all(NodeKind::Cpu)) packages.push_back(sys.nodes[static_cast<size_t>(c)].package);
  EXPECT_EQ(packages, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(sys.nodes[static_cast<size_t>(node(sys, "cpu2"))].pus, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(sys.cpuOfPu(13), node(sys, "cpu3"));
}

TEST(TopologyDiscovery, ThisVmHidesPciLocalityAndSaysSoInOneNote) {
  const System& sys = machine("vm.xml");
  ASSERT_EQ(sys.notes.size(), 1u);
  EXPECT_NE(sys.notes[0].find("PCI locality"), std::string::npos) << sys.notes[0];
  EXPECT_EQ(sys.count(NodeKind::Nic), 1);
  EXPECT_EQ(type(sys, "cpu0", "eth0"), PathType::PHB);
}

TEST(TopologyDiscovery, ThisMachineIsDiscoveredLive) {
  const System sys = discover("");
  EXPECT_TRUE(sys.thisMachine);
  ASSERT_GE(sys.count(NodeKind::Cpu), 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  for (int pu = 0; pu < CPU_SETSIZE; ++pu) {
    if (CPU_ISSET(pu, &set)) {
      EXPECT_GE(sys.cpuOfPu(pu), 0) << "PU " << pu << " is in no NUMA node";
    }
  }
}

TEST(TopologyDiscovery, BadFilesAreInvalidArgumentsNamingWhereTheyCameFrom) {
  try {
    discover("/nonexistent/machine.xml", "LOOM_TOPO_FILE");
    FAIL() << "no error";
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.code(), loomInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("LOOM_TOPO_FILE"), std::string::npos) << e.what();
  }
  const std::string garbage = ::testing::TempDir() + "loom-not-a-topology.xml";
  std::ofstream(garbage) << "<topology version=\"2.0\"><object type=\"Nonsense\"";
  try {
    discover(garbage, "LOOM_TOPO_FILE");
    FAIL() << "no error";
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.code(), loomInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(garbage), std::string::npos) << e.what();
  }
  std::remove(garbage.c_str());
}

TEST(TopologyPaths, PcieServer) {
  const System& sys = machine("pcie-8gpu.xml");
  EXPECT_EQ(type(sys, "gpu0", "gpu0"), PathType::LOC);
  EXPECT_EQ(type(sys, "gpu0", "gpu1"), PathType::PIX);  // one switch
  EXPECT_EQ(type(sys, "gpu1", "gpu2"), PathType::PHB);  // two switches of one socket
  EXPECT_EQ(type(sys, "gpu3", "gpu4"), PathType::SYS);  // across sockets
  EXPECT_EQ(type(sys, "gpu5", "mlx5_2"), PathType::PIX);
  EXPECT_EQ(type(sys, "gpu7", "mlx5_0"), PathType::SYS);
  EXPECT_EQ(type(sys, "cpu1", "gpu6"), PathType::PHB);
  EXPECT_EQ(type(sys, "cpu0", "cpu1"), PathType::SYS);
  // Bandwidth is the narrowest link: the fixture's 31.5 GB/s PCIe, then the socket link.
  EXPECT_NEAR(pathBetween(sys, node(sys, "gpu0"), node(sys, "gpu1")).GBs, 31.5, 0.01);
  EXPECT_DOUBLE_EQ(pathBetween(sys, node(sys, "gpu0"), node(sys, "gpu4")).GBs, LinkModel::kInterSocket);
  // Latency grows with the links crossed: GPU, switch, GPU < through the CPU < across sockets.
  const double pix = pathBetween(sys, node(sys, "gpu0"), node(sys, "gpu1")).latencyUs;
  const double phb = pathBetween(sys, node(sys, "gpu0"), node(sys, "gpu2")).latencyUs;
  const double sys2 = pathBetween(sys, node(sys, "gpu0"), node(sys, "gpu4")).latencyUs;
  EXPECT_DOUBLE_EQ(pix, 2 * LinkModel::kPcieLinkUs);
  EXPECT_DOUBLE_EQ(phb, 4 * LinkModel::kPcieLinkUs);
  EXPECT_DOUBLE_EQ(sys2, 4 * LinkModel::kPcieLinkUs + LinkModel::kInterSocketUs);
  // Symmetric.
  for (int a : pathEndpoints(sys)) {
    for (int b : pathEndpoints(sys)) EXPECT_EQ(pathBetween(sys, a, b).type, pathBetween(sys, b, a).type);
  }
}

TEST(TopologyPaths, DgxGpusAreNvLinkedThroughTheSwitches) {
  const System& sys = machine("dgx-h100.xml");
  for (int a : sys.all(NodeKind::Gpu)) {
    for (int b : sys.all(NodeKind::Gpu)) {
      const Path p = pathBetween(sys, a, b);
      if (a == b) continue;
      EXPECT_EQ(p.type, PathType::NVL);
      EXPECT_NEAR(p.GBs, 450.0, 0.01);  // 18 links of 25 GB/s
    }
  }
  EXPECT_EQ(type(sys, "gpu2", "mlx5_2"), PathType::PIX);
  EXPECT_EQ(type(sys, "gpu2", "mlx5_3"), PathType::PHB);
  EXPECT_EQ(type(sys, "gpu2", "mlx5_6"), PathType::SYS);
}

// A machine built by hand: switch A holds gpu1 and switch B, which holds
// gpu0; gpu2 is NVLinked to both gpu0 and gpu1, gpu3 to nobody.
TEST(TopologyPaths, NestedSwitchesArePxbAndNvLinkThroughAGpuIsNvb) {
  System sys;
  auto add = [&](NodeKind kind, std::string name, int parent, int index) {
    Node n;
    n.kind = kind;
    n.name = std::move(name);
    n.parent = parent;
    n.cpu = 0;
    n.index = index;
    n.package = 0;
    n.linkGBs = 16;
    sys.nodes.push_back(n);
    return static_cast<int>(sys.nodes.size()) - 1;
  };
  const int cpu = add(NodeKind::Cpu, "cpu0", -1, 0);
  const int a = add(NodeKind::PciSwitch, "switchA", cpu, 0);
  const int b = add(NodeKind::PciSwitch, "switchB", a, 1);
  const int gpu0 = add(NodeKind::Gpu, "gpu0", b, 0);
  const int gpu1 = add(NodeKind::Gpu, "gpu1", a, 1);
  const int gpu2 = add(NodeKind::Gpu, "gpu2", cpu, 2);
  const int gpu3 = add(NodeKind::Gpu, "gpu3", b, 3);
  EXPECT_EQ(pathBetween(sys, gpu0, gpu1).type, PathType::PXB);
  EXPECT_EQ(pathBetween(sys, gpu0, gpu3).type, PathType::PIX);
  EXPECT_EQ(pathBetween(sys, gpu3, gpu2).type, PathType::PHB);
  sys.nvlinks = {{gpu0, gpu2, 2, 50}, {gpu2, gpu1, 1, 25}};
  EXPECT_EQ(pathBetween(sys, gpu0, gpu2).type, PathType::NVL);
  EXPECT_EQ(pathBetween(sys, gpu0, gpu1).type, PathType::NVB);
  EXPECT_DOUBLE_EQ(pathBetween(sys, gpu0, gpu1).GBs, 25);
  EXPECT_EQ(pathBetween(sys, gpu3, gpu1).type, PathType::PXB);
}

TEST(TopologyPlacement, EachGpuGetsTheNicBehindItsSwitch) {
  const Placement dgx = planLayout(machine("dgx-h100.xml"), 1, 8);
  for (const RankPlace& r : dgx.ranks) {
    EXPECT_EQ(r.gpu, r.rank);
    EXPECT_EQ(r.nicName, "mlx5_" + std::to_string(r.rank));
    EXPECT_EQ(r.package, r.rank / 4);
  }
  const Placement pcie = planLayout(machine("pcie-8gpu.xml"), 1, 8);
  for (const RankPlace& r : pcie.ranks) EXPECT_EQ(r.nic, r.rank / 2) << "rank " << r.rank;
  // Without GPUs: NUMA nodes in blocks; the one NIC serves everyone.
  const Placement cpu = planLayout(machine("cpu-2s4n.xml"), 1, 8);
  for (const RankPlace& r : cpu.ranks) {
    EXPECT_EQ(r.numa, r.rank / 2);
    EXPECT_EQ(r.nicName, "mlx5_0");
  }
}

TEST(TopologyPlacement, ARankWithACudaDeviceSitsOnThatGpu) {
  const System& sys = machine("pcie-8gpu.xml");
  const RankPlace p = placeThisProcess(sys, 0, 1, "0000:33:00.0");
  EXPECT_EQ(p.gpu, 5);
  EXPECT_EQ(p.numa, 1);
  // A bus id the machine does not have: placed by local rank, as without one.
  EXPECT_EQ(placeThisProcess(sys, 3, 8, "0000:99:00.0").gpu, 3);
}

// CUDA's devices, by ordinal, are the graph's GPUs with their bus ids,
// whatever order CUDA_VISIBLE_DEVICES puts them in; one the graph lacks
// stays unmatched. A saved machine has none (they are the discovering
// process's), and says so in its JSON.
TEST(TopologyCuda, DevicesAreMatchedToTheGraphsGpusByBusId) {
  const System& sys = machine("pcie-8gpu.xml");
  const std::vector<std::string> visible = {"0000:33:00.0", sys.node(sys.find(NodeKind::Gpu, 0)).busId, "0000:99:00.0"};
  const std::vector<CudaDevice> devices = matchCudaDevices(sys, visible);
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[0].ordinal, 0);
  EXPECT_EQ(devices[0].gpu, 5);
  EXPECT_EQ(devices[1].gpu, 0);
  EXPECT_EQ(devices[2].gpu, -1);
  EXPECT_EQ(devices[2].busId, "0000:99:00.0");
  EXPECT_EQ(sys.gpuWithBusId(""), -1);
  EXPECT_TRUE(sys.cudaDevices.empty());
  EXPECT_NE(dumpJson(sys, nullptr).find("\"cuda_devices\": []"), std::string::npos);
  EXPECT_EQ(loom::normalizeBusId("00000000:33:00.0"), "0000:33:00.0") << "CUDA's spelling";
}

// A rank's listener (which populates its receive FIFOs) is bound to the
// rank's NUMA node, within the process's affinity; never on a described
// machine, which is not this one.
TEST(TopologyPlacement, LoomsThreadsRunOnTheRanksNumaNodeWithinTheAllowedCpus) {
  System sys = machine("cpu-2s4n.xml");
  RankPlace place;
  place.numa = 2;
  std::vector<int> all(16);
  for (int pu = 0; pu < 16; ++pu) all[static_cast<size_t>(pu)] = pu;
  EXPECT_TRUE(cpusFor(sys, place, all).empty()) << "a machine from a file is not this one";
  sys.thisMachine = true;
  EXPECT_EQ(cpusFor(sys, place, all), (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(cpusFor(sys, place, std::vector<int>{3, 9, 11, 20}), (std::vector<int>{9, 11}));
  EXPECT_TRUE(cpusFor(sys, place, std::vector<int>{0, 1}).empty()) << "none of node 2's units is allowed";
  place.numa = -1;
  EXPECT_TRUE(cpusFor(sys, place, all).empty());
}

TEST(TopologyPlacement, EquallyNearNicsShareTheRanks) {
  System sys;
  Node cpu;
  cpu.kind = NodeKind::Cpu;
  cpu.name = "cpu0";
  cpu.index = 0;
  cpu.cpu = 0;
  cpu.package = 0;
  sys.nodes.push_back(cpu);
  for (int k = 0; k < 2; ++k) {
    Node nic;
    nic.kind = NodeKind::Nic;
    nic.name = "nic" + std::to_string(k);
    nic.index = k;
    nic.parent = 0;
    nic.cpu = 0;
    nic.linkGBs = 16;
    sys.nodes.push_back(nic);
  }
  const Placement p = planLayout(sys, 1, 4);
  std::vector<int> nics;
  for (const RankPlace& r : p.ranks) nics.push_back(r.nic);
  EXPECT_EQ(nics, (std::vector<int>{0, 1, 0, 1}));
}

// How many times the ring steps between sockets inside each host.
std::map<uint64_t, int> socketCrossings(const Placement& p) {
  std::map<uint64_t, int> crossings;
  const size_t n = p.ring.size();
  for (size_t i = 0; i < n; ++i) {
    const RankPlace& a = p.ranks[static_cast<size_t>(p.ring[i])];
    const RankPlace& b = p.ranks[static_cast<size_t>(p.ring[(i + 1) % n])];
    if (a.host == b.host && a.package != b.package) ++crossings[a.host];
  }
  return crossings;
}

TEST(TopologyPlacement, RingsKeepHostsTogetherAndCrossEachSocketLinkAtMostTwice) {
  for (const std::string name : {"pcie-8gpu.xml", "dgx-h100.xml", "cpu-2s4n.xml", "vm.xml"}) {
    const System& sys = machine(name);
    for (int nodes : {1, 2, 3, 4}) {
      for (int perNode : {1, 2, 3, 8, 12}) {
        // Ranks dealt round-robin over the hosts and scrambled within each,
        // as a launcher that does not sort them might.
        std::vector<RankPlace> places;
        const int n = nodes * perNode;
        for (int r = 0; r < n; ++r) {
          const int host = r % nodes;
          const int local = (r / nodes * 5 + 3) % perNode;
          RankPlace p = placeByLocalRank(sys, local, perNode);
          p.rank = r;
          p.host = static_cast<uint64_t>(100 + host);
          places.push_back(p);
        }
        const Placement plan = loom::topo::plan(places);
        SCOPED_TRACE(name + " " + std::to_string(nodes) + "x" + std::to_string(perNode));
        std::vector<int> sorted = plan.ring;
        std::sort(sorted.begin(), sorted.end());
        for (int r = 0; r < n; ++r) ASSERT_EQ(sorted[static_cast<size_t>(r)], r) << "the ring is not a permutation";
        int hostChanges = 0;
        for (size_t i = 0; i < plan.ring.size(); ++i) {
          hostChanges += plan.ranks[static_cast<size_t>(plan.ring[i])].host !=
                         plan.ranks[static_cast<size_t>(plan.ring[(i + 1) % plan.ring.size()])].host;
        }
        EXPECT_EQ(hostChanges, nodes == 1 ? 0 : nodes);
        for (auto [host, crossings] : socketCrossings(plan)) EXPECT_LE(crossings, 2) << "host " << host;
        EXPECT_EQ(plan.ring, loom::topo::plan(places).ring);  // a pure function of the places
      }
    }
  }
  // With more ranks than GPUs, the ranks sharing a GPU sit side by side.
  EXPECT_EQ(planLayout(machine("pcie-8gpu.xml"), 1, 10).ring, (std::vector<int>{0, 8, 1, 9, 2, 3, 4, 5, 6, 7}));
}

int depth(const Tree& t, int i) {
  int d = 0;
  for (; t.parent[static_cast<size_t>(i)] >= 0; i = t.parent[static_cast<size_t>(i)]) {
    if (++d > static_cast<int>(t.parent.size())) return -1;  // a cycle
  }
  return i == t.root ? d : -1;
}

TEST(TopologyTrees, DoubleBinaryTreesSpanEveryNodeAndNoNodeIsInnerInBoth) {
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 31, 64}) {
    SCOPED_TRACE(std::to_string(n) + " nodes");
    const auto trees = doubleBinaryTrees(n);
    int maxDepth = 0;
    while ((2 << maxDepth) <= n) ++maxDepth;  // floor(log2 n)
    for (const Tree& t : trees) {
      ASSERT_EQ(t.parent.size(), static_cast<size_t>(n));
      EXPECT_EQ(std::count(t.parent.begin(), t.parent.end(), -1), 1);
      EXPECT_EQ(t.parent[static_cast<size_t>(t.root)], -1);
      for (int i = 0; i < n; ++i) {
        const int d = depth(t, i);
        EXPECT_GE(d, 0) << "node " << i << " does not reach the root";
        EXPECT_LE(d, maxDepth) << "node " << i;
        EXPECT_LE(t.children[static_cast<size_t>(i)].size(), 2u);
        for (int c : t.children[static_cast<size_t>(i)]) EXPECT_EQ(t.parent[static_cast<size_t>(c)], i);
      }
    }
    for (int i = 0; i < n; ++i) {
      const bool inner0 = !trees[0].children[static_cast<size_t>(i)].empty();
      const bool inner1 = !trees[1].children[static_cast<size_t>(i)].empty();
      EXPECT_FALSE(inner0 && inner1) << "node " << i << " is inner in both trees";
    }
  }
  // The shapes themselves, small enough to check by hand.
  EXPECT_EQ(doubleBinaryTrees(2)[0].parent, (std::vector<int>{1, -1}));
  EXPECT_EQ(doubleBinaryTrees(2)[1].parent, (std::vector<int>{-1, 0}));
  EXPECT_EQ(doubleBinaryTrees(3)[0].parent, (std::vector<int>{1, -1, 1}));
  EXPECT_EQ(doubleBinaryTrees(3)[1].parent, (std::vector<int>{-1, 0, 0}));
  EXPECT_EQ(doubleBinaryTrees(4)[0].parent, (std::vector<int>{1, 3, 1, -1}));
  EXPECT_EQ(doubleBinaryTrees(4)[1].parent, (std::vector<int>{-1, 2, 0, 2}));
  EXPECT_EQ(doubleBinaryTrees(8)[0].parent, (std::vector<int>{1, 3, 1, 7, 5, 3, 5, -1}));
  EXPECT_EQ(doubleBinaryTrees(8)[1].parent, (std::vector<int>{-1, 2, 4, 2, 0, 6, 4, 6}));
}

TEST(TopologyDump, JsonCarriesTheGraphPathsAndPlan) {
  const Placement p = planLayout(machine("pcie-8gpu.xml"), 2, 8);
  const std::string json = dumpJson(machine("pcie-8gpu.xml"), &p);
  EXPECT_NE(json.find("\"hostname\": \"pcie-8gpu\""), std::string::npos);
  EXPECT_NE(json.find("[\"LOC\", \"PIX\", \"PHB\", \"PHB\", \"SYS\", \"SYS\", \"SYS\", \"SYS\", \"PIX\", \"PHB\", \"SYS\", \"SYS\"]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"ring\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]"), std::string::npos);
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(std::count(json.begin(), json.end(), '['), std::count(json.begin(), json.end(), ']'));
}

TEST(LoomTopo, PrintsTheVmWithItsNoteAndAPlan) {
  auto r = runProcess({LOOM_TOPO_BIN, "--xml", fixture("vm.xml"), "--nodes", "2", "--ranks-per-node", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("note: PCI devices hang off the whole machine"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eth0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ring: 0 1 2 3"), std::string::npos) << r.output;
  auto live = runProcess({LOOM_TOPO_BIN, "--json"});
  ASSERT_EQ(live.exitCode, 0) << live.output;
  EXPECT_NE(live.output.find("\"this_machine\": true"), std::string::npos) << live.output;
}

TEST(LoomTopo, BadArgumentsAreNamed) {
  auto r = runProcess({LOOM_TOPO_BIN, "--nodes", "2"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("--ranks-per-node"), std::string::npos) << r.output;
  r = runProcess({LOOM_TOPO_BIN, "--nodes", "0", "--ranks-per-node", "2"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("--nodes needs a whole number"), std::string::npos) << r.output;
  r = runProcess({LOOM_TOPO_BIN, "--xml", "/nonexistent.xml"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.output.find("--xml: cannot open '/nonexistent.xml'"), std::string::npos) << r.output;
}

// LOOM_TOPO_FILE end to end: four rank processes placed on the DGX fixture's
// GPUs each dump the plan (%r: one file per rank); the plans are identical
// and give rank r GPU r and the NIC behind its switch. A bad file fails init
// on every rank, naming the variable.
TEST(TopologyRanks, TopoFileDrivesThePlanOnEveryRank) {
  const std::string dir = ::testing::TempDir() + "loom-topo-dump-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  auto r = runProcess({LOOMRUN_BIN, "-n", "4", "--", LOOM_PERF_BIN, "all_reduce", "-b", "4K", "-e", "4K", "-n", "2", "-w", "1"},
                      {{"LOOM_TOPO_FILE", fixture("dgx-h100.xml")}, {"LOOM_TOPO_DUMP_FILE", dir + "/plan.%r.json"}});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::vector<std::string> plans;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string json = loom::test::readFile(dir + "/plan." + std::to_string(rank) + ".json");
    ASSERT_FALSE(json.empty()) << "rank " << rank << " wrote no dump";
    EXPECT_NE(json.find("\"hostname\": \"dgx-h100\""), std::string::npos);
    plans.push_back(json.substr(json.find("\"placement\"")));
    const std::string mine = "\"rank\": " + std::to_string(rank) + ",";
    const size_t at = plans.back().find(mine);
    ASSERT_NE(at, std::string::npos);
    const std::string entry = plans.back().substr(at, plans.back().find('}', at) - at);
    EXPECT_NE(entry.find("\"gpu\": " + std::to_string(rank) + ","), std::string::npos) << entry;
    EXPECT_NE(entry.find("\"nic_name\": \"mlx5_" + std::to_string(rank) + "\""), std::string::npos) << entry;
  }
  for (int rank = 1; rank < 4; ++rank) EXPECT_EQ(plans[static_cast<size_t>(rank)], plans[0]) << "rank " << rank;
  std::filesystem::remove_all(dir);

  auto bad = runProcess({LOOMRUN_BIN, "-n", "2", "--", LOOM_PERF_BIN, "all_reduce", "-b", "8", "-e", "8"},
                        {{"LOOM_TOPO_FILE", "/nonexistent/machine.xml"}});
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_NE(bad.output.find("LOOM_TOPO_FILE: cannot open '/nonexistent/machine.xml'"), std::string::npos) << bad.output;
}

}  // namespace
