#include "collectives/comm_state.hpp"

#include <set>

namespace loom::coll {
namespace {

Layout layoutOf(Communicator& comm) {
  std::set<uint64_t> hosts;
  for (const auto& p : comm.peers()) hosts.insert(p.hostId);
  return {.nranks = comm.size(), .nodes = static_cast<int>(hosts.size())};
}

}  // namespace

CommState::CommState(Communicator& comm) : tuner(layoutOf(comm), Overrides::fromEnv()) {}

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
