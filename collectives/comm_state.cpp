#include "collectives/comm_state.hpp"

#include <set>

#include "collectives/signature_check.hpp"
#include "comm/base/env.hpp"

namespace loom::coll {
namespace {

Layout layoutOf(Communicator& comm) {
  std::set<uint64_t> hosts;
  for (const auto& p : comm.peers()) hosts.insert(p.hostId);
  const bool socketsOnly = env::getIfSet("LOOM_TRANSPORT").value_or("") == "socket";
  return {.nranks = comm.size(), .nodes = static_cast<int>(hosts.size()), .sharedMemory = hosts.size() == 1 && !socketsOnly};
}

Overrides overridesOf(const Communicator& comm) {
  Overrides o = Overrides::fromEnv();
  o.deterministic = comm.config().deterministic;
  return o;
}

}  // namespace

CommState::CommState(Communicator& comm)
    : checkSignatures(signatureCheckEnabled()),
      tuner(layoutOf(comm), overridesOf(comm)),
      ring(comm.placement().ring),
      trees(topo::doubleBinaryTrees(comm.size())),
      comm_(comm) {}

shm::NodeArea& CommState::nodeArea(size_t slotBytes) {
  if (!node_) node_ = std::make_unique<shm::NodeArea>(comm_, slotBytes);
  return *node_;
}

CommState& CommState::of(Communicator& comm) {
  std::lock_guard lock(comm.extensionMutex);
  if (!comm.collectives) comm.collectives = std::make_unique<CommState>(comm);
  return static_cast<CommState&>(*comm.collectives);
}

std::span<std::byte> CommState::scratch(size_t bytes) {
  if (scratch_.size() < bytes) {
    scratch_.clear();
    scratch_.shrink_to_fit();
    scratch_.resize(bytes);
  }
  return {scratch_.data(), bytes};
}

}  // namespace loom::coll
