// The rendezvous root behind a loomUniqueId. It runs on a thread of the
// process that called loomGetUniqueId, accepts one Hello per rank, checks
// the secret and the claims in each (rank in range, no duplicates, the same
// nranks), and answers every rank with every rank's PeerInfo. When the
// deadline passes first, it answers those that came with loomTimeout naming
// the ranks that never arrived. Connections without the secret, or with a
// malformed message, are logged and dropped; they never disturb the job.
#pragma once

#include <chrono>

#include "base/net/socket.hpp"
#include "base/secret.hpp"

namespace loom {

// Starts a root on `listener` that lives until it has answered every rank or
// its timeout passes. The process owns it; it is stopped at exit.
void startRendezvousRoot(net::Socket listener, const Secret& secret, std::chrono::milliseconds timeout);

// Frees the roots that have finished (their thread and eventfd; a finished
// root has closed its sockets already). Communicators call it as they go.
void reapRendezvousRoots();

// Roots still running in this process (for tests of resource hygiene).
size_t runningRendezvousRoots();

}  // namespace loom
