// One round of NCCL's one-thread-many-ranks idiom, as nccl-tests -g runs it:
// one thread posts a collective for each of its ranks between
// loomGroupStart and loomGroupEnd, then checks every rank's result exactly.
#pragma once

#include <loom/loom.h>

#include <string>
#include <vector>

#include "tools/check/collective_check.hpp"

namespace loom::test {

// Where the ranks' calls go: the NULL stream, one host stream per rank, or
// one host stream that all of this thread's ranks share.
enum class GroupStreams { Null, PerRank, Shared };

// Runs `coll` of `count` elements (root `root`, sum) on `comms`, ranks
// `firstRank`... of `nranks`, from this thread in one group; "" when every
// rank's result is exact, else what went wrong.
std::string runGroupRound(const std::vector<loomComm_t>& comms, int firstRank, int nranks, check::Coll coll,
                          size_t count, int root, GroupStreams streams);

}  // namespace loom::test
