// NCCL 2.28's device-communicator API (its nccl_device.h): the host
// functions libnccl.so.2 exports for it, which programs built against NCCL
// 2.28 import whether or not they call them (PyTorch 2.11's libtorch_cuda.so
// does not load without ncclDevCommCreate and ncclDevCommDestroy).
//
// Loom has no device communicators yet: creating one, or a resource one
// would hold, is ncclInvalidUsage naming what is missing, so that a client
// takes its fallback (PyTorch's NCCL symmetric memory is an opt-in backend).
// Teams are arithmetic over the communicator's ranks and are answered; like
// NCCL's, the node's team (LSA, the ranks sharing memory) assumes the
// node's ranks are consecutive. nccl.h does not declare these, as NCCL's
// does not: this header-less file holds their types, laid out as NCCL's.
#include "shim/nccl/shim.hpp"

using namespace loom::nccl;

extern "C" {
struct ncclTeam {
  int nRanks, rank, stride;
};
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;
}

namespace {

constexpr const char* kDeviceComms = "device communicators (NCCL 2.28's device API)";

// comm's rank and size and its node's ({0, 0} for a communicator that is
// not one: the teams then hold no rank).
struct Ranks {
  int rank = 0, count = 0, localRank = 0, localCount = 0;
};

Ranks ranksOf(ncclComm_t comm) {
  Ranks r;
  if (loomCommUserRank(toLoom(comm), &r.rank) != loomSuccess || loomCommCount(toLoom(comm), &r.count) != loomSuccess ||
      loomCommLocalRank(toLoom(comm), &r.localRank) != loomSuccess ||
      loomCommLocalCount(toLoom(comm), &r.localCount) != loomSuccess) {
    return {};
  }
  return r;
}

}  // namespace

LOOM_NCCL_DEFINE(ncclResult_t, ncclDevCommCreate,
                 (ncclComm_t /*comm*/, const ncclDevCommRequirements* /*reqs*/, ncclDevComm* /*outDevComm*/)) {
  return unsupported("ncclDevCommCreate", kDeviceComms);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclDevCommDestroy, (ncclComm_t /*comm*/, const ncclDevComm* /*devComm*/)) {
  return unsupported("ncclDevCommDestroy", kDeviceComms);
}

// Every rank of the communicator.
LOOM_NCCL_DEFINE(ncclTeam, ncclTeamWorld, (ncclComm_t comm)) {
  const Ranks r = ranksOf(comm);
  return {r.count, r.rank, 1};
}

// The ranks of this node.
LOOM_NCCL_DEFINE(ncclTeam, ncclTeamLsa, (ncclComm_t comm)) {
  const Ranks r = ranksOf(comm);
  return {r.localCount, r.localRank, 1};
}

// The ranks with this rank's place on every node.
LOOM_NCCL_DEFINE(ncclTeam, ncclTeamRail, (ncclComm_t comm)) {
  const Ranks r = ranksOf(comm);
  if (r.localCount == 0) return {0, 0, 0};
  return {r.count / r.localCount, r.rank / r.localCount, r.localCount};
}

// The world rank of `team`'s rank `rank`: this rank's, moved by the team's stride.
LOOM_NCCL_DEFINE(int, ncclTeamRankToWorld, (ncclComm_t comm, ncclTeam team, int rank)) {
  return ranksOf(comm).rank + (rank - team.rank) * team.stride;
}

// The same rank's place on this node.
LOOM_NCCL_DEFINE(int, ncclTeamRankToLsa, (ncclComm_t comm, ncclTeam team, int rank)) {
  const Ranks r = ranksOf(comm);
  return pncclTeamRankToWorld(comm, team, rank) - (r.rank - r.localRank);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclLsaBarrierCreateRequirement,
                 (ncclTeam /*team*/, int /*nBarriers*/, ncclLsaBarrierHandle* /*outHandle*/,
                  ncclDevResourceRequirements* /*outReq*/)) {
  return unsupported("ncclLsaBarrierCreateRequirement", kDeviceComms);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclGinBarrierCreateRequirement,
                 (ncclComm_t /*comm*/, ncclTeam /*team*/, int /*nBarriers*/, ncclGinBarrierHandle* /*outHandle*/,
                  ncclDevResourceRequirements* /*outReq*/)) {
  return unsupported("ncclGinBarrierCreateRequirement", kDeviceComms);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclLLA2ACreateRequirement,
                 (int /*nBlocks*/, int /*nSlots*/, ncclLLA2AHandle* /*outHandle*/,
                  ncclDevResourceRequirements* /*outReq*/)) {
  return unsupported("ncclLLA2ACreateRequirement", kDeviceComms);
}

// The slots an LL all-to-all resource needs: Loom makes none, so none.
LOOM_NCCL_DEFINE(int, ncclLLA2ACalcSlots, (int /*maxElts*/, int /*maxEltSize*/)) { return 0; }

// NCCL's internal hook behind ncclResetDebugInit (one name, no p twin):
// Loom reads LOOM_DEBUG and NCCL_DEBUG as it logs, so nothing to reset.
extern "C" void ncclResetDebugInitInternal(void) {}
