// Drives engines until a set of operations is done: the one wait loop every
// blocking call and every host stream task goes through.
#pragma once

#include <chrono>
#include <functional>
#include <span>

#include "comm/engine/engine.hpp"
#include "comm/engine/p2p_op.hpp"

namespace loom {

// Called by runOps when it sleeps, with the peer of the first unfinished op
// and how long nothing has moved; it may throw loom::Error to end the wait.
using OnStall = std::function<void(int peer, std::chrono::steady_clock::duration stalled)>;

// Posts `ops` on their engines and progresses those engines until every op
// has finished, backing off when nothing moves. On the first failure, when
// a communicator is aborted, or when `onStall` throws, withdraws the
// unfinished ops and throws loom::Error naming the op and the peer.
void runOps(std::span<P2pOp* const> ops, const OnStall& onStall = {});

// After runOps threw: the peer of the first op that failed by its deadline
// (LOOM_TIMEOUT_MS), or -1 when none did.
int timedOutPeer(std::span<P2pOp* const> ops);

}  // namespace loom
