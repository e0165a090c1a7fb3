#include "collectives/comm_state.hpp"

#include <algorithm>

#include "base/env.hpp"
#include "collectives/signature_check.hpp"

namespace loom::coll {
namespace {

bool socketsOnly() { return env::getIfSet("LOOM_TRANSPORT").value_or("") == "socket"; }

// The ranks per host when every host has as many and may use shared memory; else 0.
int uniformRanksPerHost(const topo::Placement& placement) {
  if (socketsOnly()) return 0;
  const size_t per = placement.hostRanks.front().size();
  for (const auto& ranks : placement.hostRanks) {
    if (ranks.size() != per) return 0;
  }
  return static_cast<int>(per);
}

Layout layoutOf(Communicator& comm) {
  const auto& placement = comm.placement();
  const int nodes = static_cast<int>(placement.hosts.size());
  return {.nranks = comm.size(),
          .nodes = nodes,
          .sharedMemory = nodes == 1 && !socketsOnly(),
          .ranksPerNode = uniformRanksPerHost(placement)};
}

// The hierarchical algorithm's ring: the ranks with this rank's local index
// on every host, hosts in the plan's order; none unless hosts are uniform.
std::optional<Ring> acrossHostsOf(Communicator& comm) {
  const auto& placement = comm.placement();
  if (placement.hosts.size() < 2 || uniformRanksPerHost(placement) < 2) return std::nullopt;
  size_t local = 0;
  for (const auto& ranks : placement.hostRanks) {
    const auto it = std::find(ranks.begin(), ranks.end(), comm.rank());
    if (it != ranks.end()) local = static_cast<size_t>(it - ranks.begin());
  }
  std::vector<int> order;
  for (const auto& ranks : placement.hostRanks) order.push_back(ranks[local]);
  return Ring(std::move(order), comm.size());
}

// Whether any rank of the job sees a CUDA device (its bootstrap record says).
bool anyRankHasDevices(const Communicator& comm) {
  const auto& peers = comm.peers();
  return std::any_of(peers.begin(), peers.end(), [](const PeerInfo& p) { return p.cudaDeviceCount > 0; });
}

Overrides overridesOf(const Communicator& comm) {
  Overrides o = Overrides::fromEnv();
  o.deterministic = comm.config().deterministic;
  o.deterministicBy = comm.config().deterministicBy;
  return o;
}

}  // namespace

CommState::CommState(Communicator& comm)
    : checkSignatures(signatureCheckEnabled()),
      stagingPieceBytes(static_cast<size_t>(env::getInt("LOOM_STAGING_PIECE_BYTES", 0, 1ll << 30))),
      jobHasDevices(anyRankHasDevices(comm)),
      tuner(layoutOf(comm), overridesOf(comm)),
      ring(comm.placement().ring, comm.size()),
      acrossHosts(acrossHostsOf(comm)),
      trees(topo::doubleBinaryTrees(comm.size())),
      channel(comm.engine()),
      comm_(comm) {}

shm::NodeArea& CommState::nodeArea(size_t slotBytes) {
  if (!node_) node_ = std::make_unique<shm::NodeArea>(comm_, slotBytes);
  return *node_;
}

CommState& CommState::create(Communicator& comm) {
  std::lock_guard lock(comm.extensionMutex);
  if (!comm.collectives) {
    comm.collectives = std::make_unique<CommState>(comm);
    comm.collectivesReady.store(comm.collectives.get(), std::memory_order_release);
  }
  return static_cast<CommState&>(*comm.collectives);
}

}  // namespace loom::coll
