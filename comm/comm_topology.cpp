#include "comm/comm_topology.hpp"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "base/device/cuda.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/rank_file.hpp"
#include "topology/discovery.hpp"
#include "topology/dump.hpp"

namespace loom {
namespace {

// What each rank tells the others, in two rounds: its place, then its NIC.
struct PlaceRecord {
  int32_t numa;
  int32_t package;
  int32_t gpu;
};
struct NicRecord {
  int32_t nic;
  char name[60];
};

template <typename Record>
std::vector<Record> allgather(Bootstrap& bootstrap, const Record& mine) {
  std::vector<Record> all(static_cast<size_t>(bootstrap.size()));
  all[static_cast<size_t>(bootstrap.rank())] = mine;
  bootstrap.allgather(std::as_writable_bytes(std::span(all)), sizeof(Record));
  return all;
}

}  // namespace

const topo::System& processSystem() {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const topo::System>> cache;  // by LOOM_TOPO_FILE
  const std::string file = env::get("LOOM_TOPO_FILE");
  std::lock_guard lock(mutex);
  auto& slot = cache[file];
  if (!slot) {
    if (!file.empty()) {
      slot = std::make_unique<const topo::System>(topo::discover(file, "LOOM_TOPO_FILE"));
    } else {
      try {
        slot = std::make_unique<const topo::System>(topo::discover(""));
      } catch (const Error& e) {
        LOOM_WARN(Graph, "topology discovery failed, ranks are placed without it: %s", e.what());
        slot = std::make_unique<const topo::System>();
      }
    }
    for (const auto& note : slot->notes) LOOM_INFO(Graph, "%s", note.c_str());
  }
  return *slot;
}

topo::Placement planTopology(Bootstrap& bootstrap, uint64_t hostId, int localRank, int localSize) {
  const topo::System& sys = processSystem();
  const topo::RankPlace self = topo::placeThisProcess(sys, localRank, localSize, cuda::currentDeviceBusId());
  const auto places = allgather(bootstrap, PlaceRecord{self.numa, self.package, self.gpu});

  std::vector<topo::RankPlace> all(places.size());
  for (size_t r = 0; r < all.size(); ++r) {
    all[r] = {.rank = static_cast<int>(r), .host = bootstrap.peers()[r].hostId, .numa = places[r].numa,
              .package = places[r].package, .gpu = places[r].gpu, .nic = -1, .nicName = {}};
  }
  // This host's ranks choose their NICs from this host's machine; the
  // other hosts' choices arrive in the second round.
  std::vector<topo::RankPlace> local;
  for (const auto& p : all) {
    if (p.host == hostId) local.push_back(p);
  }
  topo::chooseNics(sys, local);
  NicRecord mine{-1, {}};
  for (const auto& p : local) {
    if (p.rank == bootstrap.rank()) {
      mine.nic = p.nic;
      std::strncpy(mine.name, p.nicName.c_str(), sizeof mine.name - 1);
    }
  }
  const auto nics = allgather(bootstrap, mine);
  for (size_t r = 0; r < all.size(); ++r) {
    all[r].nic = nics[r].nic;
    all[r].nicName.assign(nics[r].name, strnlen(nics[r].name, sizeof nics[r].name));
  }

  topo::Placement placement = topo::plan(std::move(all));
  LOOM_INFO(Graph, "rank %d: NUMA node %d, GPU %d, NIC %s", bootstrap.rank(), self.numa, self.gpu,
            mine.nic >= 0 ? mine.name : "none");
  if (auto dump = env::getIfSet("LOOM_TOPO_DUMP_FILE")) {
    if (auto path = rankFilePath(*dump, bootstrap.rank(), Writers::RankZero)) {
      writeTextFile(*path, topo::dumpJson(sys, &placement), "LOOM_TOPO_DUMP_FILE");
      LOOM_INFO(Graph, "topology written to %s", path->c_str());
    }
  }
  return placement;
}

}  // namespace loom
