// A communicator's topology: this machine (discovered once per process, or
// LOOM_TOPO_FILE), every rank's place, and the plan that follows from them
// (ring order, trees across hosts, NIC per rank), identical on every rank
// because it is computed from allgathered places.
#pragma once

#include "comm/bootstrap/bootstrap.hpp"
#include "topology/placement.hpp"
#include "topology/system.hpp"

namespace loom {

// This process's machine: LOOM_TOPO_FILE when set (a bad file is
// loomInvalidArgument naming it), else hwloc discovery (a failure leaves an
// empty machine and a warning: topology only orders, it never gates).
const topo::System& processSystem();

// Places every rank (two allgathers on `bootstrap`), plans, and writes
// LOOM_TOPO_DUMP_FILE when set. `localRank`/`localSize` as the communicator counts them.
topo::Placement planTopology(Bootstrap& bootstrap, uint64_t hostId, int localRank, int localSize);

}  // namespace loom
