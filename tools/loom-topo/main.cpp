// loom-topo: the machine as Loom sees it, and what Loom would do on it.
//   loom-topo                                 this machine: tree, path matrix
//   loom-topo --xml FILE                      a saved machine (hwloc v2.0 XML) instead
//   loom-topo --nodes N --ranks-per-node R    also the rings, trees and NIC per rank
//                                             for N such machines with R ranks each
//   loom-topo --json                          all of it as JSON (what LOOM_TOPO_DUMP_FILE holds)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/ranges.hpp"
#include "topology/discovery.hpp"
#include "topology/dump.hpp"
#include "topology/paths.hpp"
#include "topology/placement.hpp"

namespace {

using namespace loom::topo;

struct Options {
  std::string xml;
  int nodes = 0;
  int ranksPerNode = 0;
  bool json = false;
};

[[noreturn]] void usage(const char* problem) {
  if (problem) std::fprintf(stderr, "loom-topo: %s\n", problem);
  std::fprintf(stderr,
               "usage: loom-topo [--xml FILE] [--nodes N --ranks-per-node R] [--json]\n"
               "  --xml FILE             load a saved machine (hwloc v2.0 XML) instead of this one\n"
               "  --nodes N              with --ranks-per-node: show the plan for N such machines\n"
               "  --ranks-per-node R     ranks on each machine (1 to 4096)\n"
               "  --json                 print everything as JSON\n");
  std::exit(2);
}

int positive(const char* flag, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (!*text || *end || v < 1 || v > 4096) {
    usage((std::string(flag) + " needs a whole number from 1 to 4096, not '" + text + "'").c_str());
  }
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage((std::string(a) + " needs a value").c_str());
      return argv[++i];
    };
    if (!std::strcmp(a, "--xml")) o.xml = next();
    else if (!std::strcmp(a, "--nodes")) o.nodes = positive(a, next());
    else if (!std::strcmp(a, "--ranks-per-node")) o.ranksPerNode = positive(a, next());
    else if (!std::strcmp(a, "--json")) o.json = true;
    else if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) usage(nullptr);
    else usage((std::string("unknown argument '") + a + "'").c_str());
  }
  if ((o.nodes == 0) != (o.ranksPerNode == 0)) usage("--nodes and --ranks-per-node go together");
  return o;
}

void printSubtree(const System& sys, int parent, int depth) {
  for (size_t i = 0; i < sys.nodes.size(); ++i) {
    const Node& n = sys.nodes[i];
    if (n.parent != parent || n.kind == NodeKind::Cpu) continue;
    std::printf("%*s%-10s %-12s %-9s %5.1f GB/s", 2 * depth, "", n.name.c_str(), n.busId.c_str(), n.model.c_str(), n.linkGBs);
    if (n.kind == NodeKind::Nic) {
      for (size_t k = 1; k < n.netdevs.size(); ++k) std::printf("  %s", n.netdevs[k].c_str());
      if (n.speedGbps > 0) std::printf("  %.0f Gb/s", n.speedGbps);
    }
    std::printf("\n");
    printSubtree(sys, static_cast<int>(i), depth + 1);
  }
}

void printMachine(const System& sys, const std::string& source) {
  std::printf("machine %s (%s)\n", sys.hostname.empty() ? "?" : sys.hostname.c_str(), source.c_str());
  for (const auto& note : sys.notes) std::printf("note: %s\n", note.c_str());
  for (int c : sys.all(NodeKind::Cpu)) {
    const Node& n = sys.nodes[static_cast<size_t>(c)];
    std::printf("%-6s socket %d, PUs %s  %s\n", n.name.c_str(), n.package, loom::formatRanges(n.pus).c_str(), n.model.c_str());
    printSubtree(sys, c, 1);
  }
  if (!sys.cudaDevices.empty()) {
    // What a rank's CUDA device is in the graph: CUDA_VISIBLE_DEVICES
    // renumbers the devices, the graph's GPUs go by bus id.
    std::printf("CUDA devices of this process:\n");
    for (const CudaDevice& d : sys.cudaDevices) {
      std::printf("  %d  %-12s %s\n", d.ordinal, d.busId.c_str(),
                  d.gpu >= 0 ? ("gpu" + std::to_string(d.gpu)).c_str() : "(no GPU of the graph has this bus id)");
    }
  }
  if (!sys.nvlinks.empty()) {
    std::printf("NVLink:\n");
    for (const auto& l : sys.nvlinks) {
      std::printf("  %s - %s: %d links, %.0f GB/s\n", sys.nodes[static_cast<size_t>(l.a)].name.c_str(),
                  sys.nodes[static_cast<size_t>(l.b)].name.c_str(), l.links, l.GBs);
    }
  }
  const std::vector<int> ends = pathEndpoints(sys);
  std::printf("paths:\n%-10s", "");
  for (int e : ends) std::printf(" %-9s", sys.nodes[static_cast<size_t>(e)].name.c_str());
  std::printf("\n");
  for (int a : ends) {
    std::printf("%-10s", sys.nodes[static_cast<size_t>(a)].name.c_str());
    for (int b : ends) std::printf(" %-9s", std::string(pathName(pathBetween(sys, a, b).type)).c_str());
    std::printf("\n");
  }
}

void printTree(const char* label, const Tree& t) {
  std::printf("%s root node %d; parent of each node:", label, t.root);
  for (int p : t.parent) std::printf(" %d", p);
  std::printf("\n");
}

void printPlacement(const System& sys, const Placement& p, const Options& o) {
  std::printf("plan for %d node(s) x %d rank(s):\n", o.nodes, o.ranksPerNode);
  std::printf("  %-5s %-5s %-5s %-7s %-4s %s\n", "rank", "node", "numa", "socket", "gpu", "nic (path)");
  for (const RankPlace& r : p.ranks) {
    std::string nic = "-";
    if (r.nic >= 0) {
      const int from = r.gpu >= 0 ? sys.find(NodeKind::Gpu, r.gpu) : sys.find(NodeKind::Cpu, r.numa);
      nic = r.nicName + " (" + std::string(pathName(pathBetween(sys, from, sys.find(NodeKind::Nic, r.nic)).type)) + ")";
    }
    std::printf("  %-5d %-5llu %-5d %-7d %-4s %s\n", r.rank, static_cast<unsigned long long>(r.host), r.numa, r.package,
                r.gpu >= 0 ? std::to_string(r.gpu).c_str() : "-", nic.c_str());
  }
  std::printf("ring:");
  for (int r : p.ring) std::printf(" %d", r);
  std::printf("\n");
  printTree("tree 0:", p.trees[0]);
  printTree("tree 1:", p.trees[1]);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    const System sys = discover(o.xml, "--xml");
    std::optional<Placement> placement;
    if (o.nodes > 0) placement = planLayout(sys, o.nodes, o.ranksPerNode);
    if (o.json) {
      std::fputs(dumpJson(sys, placement ? &*placement : nullptr).c_str(), stdout);
      return 0;
    }
    printMachine(sys, o.xml.empty() ? "this machine, discovered by hwloc" : o.xml);
    if (placement) printPlacement(sys, *placement, o);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom-topo: %s\n", e.what());
    return 1;
  }
  return 0;
}
