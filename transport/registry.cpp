#include "transport/registry.hpp"

#include "base/env.hpp"
#include "base/error.hpp"
#include "transport/handshake.hpp"
#include "transport/ibverbs/ib_transport.hpp"
#include "transport/shm/shm_transport.hpp"
#include "transport/socket/socket_transport.hpp"
#if LOOM_HAVE_UCX
#include "transport/ucx/ucx_transport.hpp"
#endif

namespace loom::transport {
namespace {

// One line per transport, in the order that breaks a tie of preference.
// Wire ids in use: 1 shm, 2 socket, 4 ucx, 5 ibverbs; reserved: 3 cuda_ipc.
using Factory = std::unique_ptr<Transport> (*)();
constexpr Factory kTransports[] = {
    []() -> std::unique_ptr<Transport> { return std::make_unique<shm::ShmTransport>(); },
    []() -> std::unique_ptr<Transport> { return std::make_unique<sock::SocketTransport>(); },
#if LOOM_HAVE_UCX
    []() -> std::unique_ptr<Transport> { return std::make_unique<ucx::UcxTransport>(); },
#endif
    []() -> std::unique_ptr<Transport> { return std::make_unique<ibverbs::IbTransport>(); },
};

}  // namespace

std::vector<std::unique_ptr<Transport>> allTransports() {
  std::vector<std::unique_ptr<Transport>> all;
  for (Factory make : kTransports) all.push_back(make());
  return all;
}

std::string transportNames() {
  std::string names;
  for (const auto& t : allTransports()) names += (names.empty() ? "" : ", ") + std::string(t->name());
  return names;
}

Transport& selectTransport(std::span<const std::unique_ptr<Transport>> transports, const Endpoint& self,
                           const Endpoint& peer) {
  if (auto forced = env::getIfSet("LOOM_TRANSPORT")) {
    for (const auto& t : transports) {
      if (*forced != t->name()) continue;
      if (t->preference(self, peer) <= 0) {
        throw Error(loomInvalidUsage, "LOOM_TRANSPORT=" + *forced + " cannot reach " + peerName(peer) + " (" +
                                          t->cannotReach(self, peer) + ")");
      }
      return *t;
    }
    throw Error(loomInvalidArgument, "LOOM_TRANSPORT='" + *forced + "' is not one of: " + transportNames());
  }
  Transport* best = nullptr;
  int bestPreference = 0;
  for (const auto& t : transports) {
    const int preference = t->preference(self, peer);
    if (preference > bestPreference) {
      best = t.get();
      bestPreference = preference;
    }
  }
  if (best == nullptr) throw Error(loomInternalError, "no transport reaches " + peerName(peer));
  return *best;
}

}  // namespace loom::transport
