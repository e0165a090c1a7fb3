// Runs one validated collective on a communicator: resolves its reduction,
// asks the tuner for an algorithm, runs it, and finishes averages. Blocking;
// called by the group machinery on the caller's thread or a host stream's.
#pragma once

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

void runCollective(Communicator& comm, const Collective& c);

}  // namespace loom::coll
