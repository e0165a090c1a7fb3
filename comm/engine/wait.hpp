// Drives engines until a set of operations is done: the one wait loop every
// blocking call and every host stream task goes through.
#pragma once

#include <span>

#include "comm/engine/engine.hpp"
#include "comm/engine/p2p_op.hpp"

namespace loom {

// Posts `ops` on their engines and progresses those engines until every op
// has finished, backing off when nothing moves. On the first failure, or when
// a communicator is aborted, withdraws the unfinished ops and throws
// loom::Error naming the op and the peer.
void runOps(std::span<P2pOp* const> ops);

}  // namespace loom
