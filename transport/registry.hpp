// The transports this build has, and the choice among them for a path.
// Each transport is a folder (shm/, socket/, ucx/, ibverbs/; later
// cuda_ipc/) and one line in registry.cpp; nothing above transport/ names one.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace loom::transport {

// One of every transport this build has, in registry order.
std::vector<std::unique_ptr<Transport>> allTransports();

// "shm, socket": every transport's name, in registry order.
std::string transportNames();

// The transport for the path self -> peer: LOOM_TRANSPORT's if set (an error
// naming the peer if it cannot reach it), else the one that prefers the path
// most.
Transport& selectTransport(std::span<const std::unique_ptr<Transport>> transports, const Endpoint& self,
                           const Endpoint& peer);

}  // namespace loom::transport
