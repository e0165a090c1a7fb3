// Communicators, versions and memory through NCCL's names.
#include <loom/loom.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <string>

#include "shim/nccl/shim.hpp"

namespace loom::nccl {
namespace {

// NCCL's config as Loom's: blocking is read when the caller's struct (its
// `size`) holds it, else NCCL_COMM_BLOCKING's; the rest has no Loom
// meaning. NULL: Loom's defaults and NCCL_COMM_BLOCKING.
bool toLoomConfig(const ncclConfig_t* config, const char* call, loomConfig_t* out, ncclResult_t* failure) {
  *out = LOOM_CONFIG_INITIALIZER;
  out->blocking = defaultBlocking() == NCCL_CONFIG_UNDEF_INT ? LOOM_CONFIG_UNDEF_INT : defaultBlocking();
  if (config == nullptr) return true;
  if (config->magic != NCCL_API_MAGIC || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    *failure = fail(ncclInvalidArgument, std::string(call) +
                                             ": config was not set up with NCCL_CONFIG_INITIALIZER (its magic or "
                                             "size is wrong)");
    return false;
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) out->blocking = config->blocking;
  return true;
}

loomUniqueId toLoomId(const ncclUniqueId& id) {
  static_assert(sizeof(loomUniqueId) == sizeof(ncclUniqueId), "the ids are one size");
  loomUniqueId out;
  std::memcpy(&out, &id, sizeof out);
  return out;
}

// ncclCommRegister's handle: Loom reads host and loomMemAlloc buffers in
// place without one, and device buffers on the resident path once every peer
// has opened their allocation (comm/resident_regions.hpp), so a
// registration only remembers what it names.
struct Registration {
  void* buffer;
  size_t bytes;
};

}  // namespace
}  // namespace loom::nccl

using namespace loom::nccl;

LOOM_NCCL_DEFINE(ncclResult_t, ncclGetVersion, (int* version)) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId)) {
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  loomUniqueId id;
  const ncclResult_t r = fromLoom(loomGetUniqueId(&id));
  if (r == ncclSuccess) std::memcpy(uniqueId, &id, sizeof id);
  return r;
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommInitRankConfig,
                 (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config)) {
  loomConfig_t c;
  ncclResult_t failure = ncclSuccess;
  if (!toLoomConfig(config, "ncclCommInitRankConfig", &c, &failure)) return failure;
  return fromLoom(
      loomCommInitRankConfig(reinterpret_cast<loomComm_t*>(comm), nranks, toLoomId(commId), rank, &c));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank)) {
  return pncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist)) {
  return fromLoom(loomCommInitAll(reinterpret_cast<loomComm_t*>(comm), ndev, devlist));
}

// Several ids only spread NCCL's bootstrap over several roots; Loom's one
// root serves, so the first id is the communicator's.
LOOM_NCCL_DEFINE(ncclResult_t, ncclCommInitRankScalable,
                 (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config)) {
  if (nId < 1 || commIds == nullptr) {
    return fail(ncclInvalidArgument,
                "ncclCommInitRankScalable: nId=" + std::to_string(nId) + " with commIds " +
                    (commIds == nullptr ? "NULL" : "given") + " (at least one id is needed)");
  }
  return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm)) { return fromLoom(loomCommFinalize(toLoom(comm))); }
LOOM_NCCL_DEFINE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm)) { return fromLoom(loomCommDestroy(toLoom(comm))); }
LOOM_NCCL_DEFINE(ncclResult_t, ncclCommAbort, (ncclComm_t comm)) { return fromLoom(loomCommAbort(toLoom(comm))); }

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommRevoke, (ncclComm_t /*comm*/, int /*revokeFlags*/)) {
  return unsupported("ncclCommRevoke", "revoking a communicator while its operations run (abort it, or shrink it)");
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommSplit,
                 (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config)) {
  loomConfig_t c;
  ncclResult_t failure = ncclSuccess;
  if (!toLoomConfig(config, "ncclCommSplit", &c, &failure)) return failure;
  return fromLoom(loomCommSplit(toLoom(comm), color, key, reinterpret_cast<loomComm_t*>(newcomm),
                                config == nullptr ? nullptr : &c));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommShrink,
                 (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                  ncclConfig_t* config, int shrinkFlags)) {
  static_assert(NCCL_SHRINK_ABORT == LOOM_SHRINK_ABORT && NCCL_SHRINK_DEFAULT == LOOM_SHRINK_DEFAULT);
  loomConfig_t c;
  ncclResult_t failure = ncclSuccess;
  if (!toLoomConfig(config, "ncclCommShrink", &c, &failure)) return failure;
  return fromLoom(loomCommShrink(toLoom(comm), excludeRanksList, excludeRanksCount,
                                 reinterpret_cast<loomComm_t*>(newcomm), config == nullptr ? nullptr : &c,
                                 shrinkFlags));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t /*comm*/, ncclUniqueId* /*uniqueId*/)) {
  return unsupported("ncclCommGetUniqueId", "growing a communicator");
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommGrow,
                 (ncclComm_t /*comm*/, int /*nRanks*/, const ncclUniqueId* /*uniqueId*/, int /*rank*/,
                  ncclComm_t* /*newcomm*/, ncclConfig_t* /*config*/)) {
  return unsupported("ncclCommGrow", "growing a communicator");
}

LOOM_NCCL_DEFINE(void, ncclResetDebugInit, (void)) {}  // Loom reads LOOM_DEBUG (and NCCL_DEBUG) as it logs

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError)) {
  loomResult_t state = loomSuccess;
  const ncclResult_t r = fromLoom(loomCommGetAsyncError(toLoom(comm), asyncError == nullptr ? nullptr : &state));
  if (r == ncclSuccess) *asyncError = toNccl(state);
  return r;
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count)) {
  return fromLoom(loomCommCount(toLoom(comm), count));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank)) {
  return fromLoom(loomCommUserRank(toLoom(comm), rank));
}

// The CUDA device the rank was created on (ncclCommInitAll: its devlist's);
// a host communicator has none.
LOOM_NCCL_DEFINE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device)) {
  return fromLoom(loomCommCuDevice(toLoom(comm), device));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle)) {
  int count = 0;
  if (const ncclResult_t r = fromLoom(loomCommCount(toLoom(comm), &count)); r != ncclSuccess) return r;
  if (handle == nullptr) return fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  if (buff == nullptr && size != 0) return fail(ncclInvalidArgument, "ncclCommRegister: buff is NULL");
  auto* registration = new (std::nothrow) Registration{buff, size};
  if (registration == nullptr) return fail(ncclSystemError, "ncclCommRegister: out of memory");
  *handle = registration;
  return ncclSuccess;
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle)) {
  int count = 0;
  if (const ncclResult_t r = fromLoom(loomCommCount(toLoom(comm), &count)); r != ncclSuccess) return r;
  if (handle == nullptr) return fail(ncclInvalidArgument, "ncclCommDeregister: handle is NULL");
  delete static_cast<Registration*>(handle);
  return ncclSuccess;
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclCommSuspend, (ncclComm_t /*comm*/, int /*flags*/)) {
  return unsupported("ncclCommSuspend", "suspending a communicator");
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclCommResume, (ncclComm_t /*comm*/)) {
  return unsupported("ncclCommResume", "suspending a communicator");
}

// GPU memory NCCL tracks: a Loom communicator allocates none yet.
LOOM_NCCL_DEFINE(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value)) {
  int count = 0;
  if (const ncclResult_t r = fromLoom(loomCommCount(toLoom(comm), &count)); r != ncclSuccess) return r;
  if (value == nullptr) return fail(ncclInvalidArgument, "ncclCommMemStats: value is NULL");
  if (stat < ncclStatGpuMemSuspend || stat > ncclStatGpuMemTotal) {
    return fail(ncclInvalidArgument, "ncclCommMemStats: stat=" + std::to_string(stat) + " is not a statistic");
  }
  *value = 0;
  return ncclSuccess;
}

// Windows are Loom's symmetric windows: NCCL_WIN_COLL_SYMMETRIC is Loom's
// flag; the ordering and GIN hints ask nothing of a window Loom reads.
LOOM_NCCL_DEFINE(ncclResult_t, ncclCommWindowRegister,
                 (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags)) {
  loomWindow_t window = nullptr;
  const ncclResult_t r = fromLoom(loomCommWindowRegister(toLoom(comm), buff, size, win == nullptr ? nullptr : &window,
                                                         winFlags & NCCL_WIN_COLL_SYMMETRIC));
  if (r == ncclSuccess) *win = reinterpret_cast<ncclWindow_t>(window);
  return r;
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win)) {
  return fromLoom(loomCommWindowDeregister(toLoom(comm), reinterpret_cast<loomWindow_t>(win)));
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr)) {
  return fromLoom(loomWinGetUserPtr(toLoom(comm), reinterpret_cast<loomWindow_t>(win), outUserPtr));
}

// NCCL's is device memory. Where no CUDA device is visible, a CPU program
// gets host memory its node's ranks read in place (Loom's extension, as host
// pointers are everywhere in this shim).
LOOM_NCCL_DEFINE(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size)) {
  const loomResult_t onDevice = loomMemAllocDevice(ptr, size);
  return fromLoom(onDevice == loomInvalidUsage ? loomMemAlloc(ptr, size) : onDevice);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclMemFree, (void* ptr)) { return fromLoom(loomMemFree(ptr)); }

LOOM_NCCL_DEFINE(ncclResult_t, ncclGroupStart, (void)) { return fromLoom(loomGroupStart()); }
LOOM_NCCL_DEFINE(ncclResult_t, ncclGroupEnd, (void)) { return fromLoom(loomGroupEnd()); }
LOOM_NCCL_DEFINE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * /*simInfo*/)) {
  return unsupported("ncclGroupSimulateEnd", "simulating a group");
}
