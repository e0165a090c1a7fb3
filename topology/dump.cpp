#include "topology/dump.hpp"

#include <cstdio>

#include "topology/paths.hpp"

namespace loom::topo {
namespace {

std::string hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

void writeTree(JsonWriter& json, const Tree& tree) {
  json.beginObject().field("root", tree.root).key("parent").beginArray(JsonWriter::Layout::OneLine);
  for (int p : tree.parent) json.value(p);
  json.endArray().endObject();
}

}  // namespace

std::vector<int> pathEndpoints(const System& sys) {
  std::vector<int> out = sys.all(NodeKind::Gpu);
  if (out.empty()) out = sys.all(NodeKind::Cpu);
  for (int n : sys.all(NodeKind::Nic)) out.push_back(n);
  return out;
}

void writeSystem(JsonWriter& json, const System& sys) {
  json.beginObject().field("hostname", sys.hostname).field("this_machine", sys.thisMachine);
  json.key("notes").beginArray();
  for (const auto& note : sys.notes) json.value(note);
  json.endArray();
  json.key("nodes").beginArray();
  for (size_t i = 0; i < sys.nodes.size(); ++i) {
    const Node& n = sys.nodes[i];
    json.beginObject().field("id", static_cast<int>(i)).field("kind", kindName(n.kind)).field("name", n.name);
    json.field("index", n.index).field("cpu", n.cpu).field("parent", n.parent);
    if (!n.busId.empty()) json.field("bus_id", n.busId);
    if (!n.model.empty()) json.field("model", n.model);
    if (n.kind == NodeKind::Cpu) {
      json.field("package", n.package).key("pus").beginArray(JsonWriter::Layout::OneLine);
      for (int pu : n.pus) json.value(pu);
      json.endArray();
    } else {
      json.field("link_GBs", n.linkGBs);
    }
    if (n.kind == NodeKind::Nic) {
      json.field("speed_Gbps", n.speedGbps).key("netdevs").beginArray(JsonWriter::Layout::OneLine);
      for (const auto& d : n.netdevs) json.value(d);
      json.endArray();
    }
    json.endObject();
  }
  json.endArray();
  json.key("nvlinks").beginArray();
  for (const auto& l : sys.nvlinks) {
    json.beginObject().field("a", l.a).field("b", l.b).field("links", l.links).field("GBs", l.GBs).endObject();
  }
  json.endArray();
  json.key("cuda_devices").beginArray();
  for (const CudaDevice& d : sys.cudaDevices) {
    json.beginObject().field("ordinal", d.ordinal).field("bus_id", d.busId).field("gpu", d.gpu).endObject();
  }
  json.endArray();
  const std::vector<int> ends = pathEndpoints(sys);
  json.key("paths").beginObject().key("names").beginArray(JsonWriter::Layout::OneLine);
  for (int e : ends) json.value(sys.nodes[static_cast<size_t>(e)].name);
  json.endArray().key("types").beginArray();
  for (int a : ends) {
    json.beginArray(JsonWriter::Layout::OneLine);
    for (int b : ends) json.value(pathName(pathBetween(sys, a, b).type));
    json.endArray();
  }
  json.endArray().key("GBs").beginArray();
  for (int a : ends) {
    json.beginArray(JsonWriter::Layout::OneLine);
    for (int b : ends) json.value(pathBetween(sys, a, b).GBs);
    json.endArray();
  }
  json.endArray().key("latency_us").beginArray();
  for (int a : ends) {
    json.beginArray(JsonWriter::Layout::OneLine);
    for (int b : ends) json.value(pathBetween(sys, a, b).latencyUs);
    json.endArray();
  }
  json.endArray().endObject();
  json.endObject();
}

void writePlacement(JsonWriter& json, const Placement& placement) {
  json.beginObject().key("hosts").beginArray();
  for (size_t h = 0; h < placement.hosts.size(); ++h) {
    json.beginObject().field("host", hex(placement.hosts[h])).key("ranks").beginArray(JsonWriter::Layout::OneLine);
    for (int r : placement.hostRanks[h]) json.value(r);
    json.endArray().endObject();
  }
  json.endArray().key("ranks").beginArray();
  for (const RankPlace& p : placement.ranks) {
    json.beginObject().field("rank", p.rank).field("host", hex(p.host)).field("numa", p.numa);
    json.field("package", p.package).field("gpu", p.gpu).field("nic", p.nic).field("nic_name", p.nicName);
    json.endObject();
  }
  json.endArray().key("ring").beginArray(JsonWriter::Layout::OneLine);
  for (int r : placement.ring) json.value(r);
  json.endArray().key("trees").beginArray();
  for (const Tree& t : placement.trees) writeTree(json, t);
  json.endArray().endObject();
}

std::string dumpJson(const System& sys, const Placement* placement) {
  JsonWriter json;
  json.beginObject().key("system");
  writeSystem(json, sys);
  if (placement) {
    json.key("placement");
    writePlacement(json, *placement);
  }
  json.endObject();
  return json.str();
}

}  // namespace loom::topo
