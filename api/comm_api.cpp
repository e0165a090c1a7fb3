// The communicator half of <loom/loom.h>: creation, teardown, queries, errors.
#include <loom/loom.h>

#include <chrono>
#include <span>
#include <thread>

#include "api/api_call.hpp"
#include "base/deadline.hpp"
#include "base/log.hpp"
#include "comm/comm_create.hpp"
#include "comm/engine/group.hpp"

using loom::api::call;
using loom::api::ready;
using loom::api::requireNonNull;

namespace {

// Host-stream tasks still queued on `comm` hold it; they end within its timeout.
void waitForStreamWork(loomComm& comm, const char* what) {
  auto deadline = loom::Deadline::after(comm.config().timeout + std::chrono::seconds(1));
  while (comm.streamTasks.load(std::memory_order_acquire) != 0) {
    if (deadline.expired()) {
      throw loom::Error(loomInvalidUsage, std::string(what) + ": operations on a host stream still use this "
                                                              "communicator; synchronize the stream first");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

extern "C" {

loomResult_t loomGetVersion(int* version) {
  return call(__func__, nullptr, [&] {
    requireNonNull(version, "version");
    *version = LOOM_VERSION_CODE;
  });
}

const char* loomGetErrorString(loomResult_t result) { return loom::resultName(result); }

const char* loomGetLastError(loomComm_t comm) { return loom::api::lastErrorFor(comm); }

loomResult_t loomGetUniqueId(loomUniqueId* uniqueId) {
  return call(__func__, nullptr, [&] {
    requireNonNull(uniqueId, "uniqueId");
    *uniqueId = loom::userUniqueId(loom::Config::resolve(nullptr).timeout);
  });
}

loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId, int rank,
                                    loomConfig_t* config) {
  bool inProgress = false;
  loomResult_t result = call(__func__, nullptr, [&] {
    if (loom::api::tracing()) {
      loom::api::traceArguments("nranks=%d rank=%d blocking=%d", nranks, rank,
                                config != nullptr ? config->blocking : LOOM_CONFIG_UNDEF_INT);
    }
    requireNonNull(comm, "comm");
    *comm = nullptr;
    auto cfg = loom::Config::resolve(config);
    *comm = loom::createCommInGroup(nranks, commId, rank, cfg).release();
    inProgress = !cfg.blocking;
  });
  return result == loomSuccess && inProgress ? loomInProgress : result;
}

loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId, int rank) {
  return loomCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist) {
  return call(__func__, nullptr, [&] {
    requireNonNull(comms, "comms");
    const std::span<const int> devices(devlist, devlist != nullptr && ndev > 0 ? static_cast<size_t>(ndev) : 0);
    auto created = loom::createLocalComms(ndev, devices, loom::Config::resolve(nullptr));
    for (size_t i = 0; i < created.size(); ++i) comms[i] = created[i].release();
  });
}

loomResult_t loomCommInitFromEnv(loomComm_t* comm, loomConfig_t* config) {
  return call(__func__, nullptr, [&] {
    requireNonNull(comm, "comm");
    *comm = nullptr;
    *comm = loom::createCommFromEnv(loom::Config::resolve(config)).release();
  });
}

loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm, loomConfig_t* config) {
  bool inProgress = false;
  const loomResult_t result = call(__func__, comm, [&] {
    if (loom::api::tracing()) loom::api::traceArguments("color=%d key=%d", color, key);
    requireNonNull(newcomm, "newcomm");
    *newcomm = nullptr;
    loomComm& parent = ready(comm);
    // Unset fields inherit the parent's settings, as in NCCL.
    loom::Config cfg = config != nullptr ? loom::Config::resolve(config) : parent.config();
    // Inside a group it runs at the group's end with the group's other
    // splits and inits (one thread splitting several ranks); *newcomm is
    // set then, as NCCL's is.
    auto split = [&parent, color, key, cfg, newcomm] {
      loom::LogRankScope scope(parent.rank());
      *newcomm = loom::splitComm(parent, color, key, cfg).release();
    };
    if (!loom::group::defer({split, cfg.blocking})) split();
    inProgress = !cfg.blocking && color != LOOM_SPLIT_NOCOLOR;
  });
  return result == loomSuccess && inProgress ? loomInProgress : result;
}

loomResult_t loomCommShrink(loomComm_t comm, int* excludeRanksList, int excludeRanksCount, loomComm_t* newcomm,
                            loomConfig_t* config, int shrinkFlags) {
  return call(__func__, comm, [&] {
    requireNonNull(comm, "comm");
    requireNonNull(newcomm, "newcomm");
    *newcomm = nullptr;
    if (excludeRanksCount < 0) {
      throw loom::Error(loomInvalidArgument, "excludeRanksCount=" + std::to_string(excludeRanksCount) + " is negative");
    }
    if (excludeRanksCount > 0) requireNonNull(excludeRanksList, "excludeRanksList");
    if (shrinkFlags != LOOM_SHRINK_DEFAULT && shrinkFlags != LOOM_SHRINK_ABORT) {
      throw loom::Error(loomInvalidArgument, "shrinkFlags=" + std::to_string(shrinkFlags) +
                                                 " is neither LOOM_SHRINK_DEFAULT nor LOOM_SHRINK_ABORT");
    }
    comm->requireInitialized();  // a revoked communicator may shrink
    loom::LogRankScope scope(comm->rank());
    if (shrinkFlags == LOOM_SHRINK_ABORT) comm->cancelOperations();
    loom::Config cfg = config != nullptr ? loom::Config::resolve(config) : comm->config();
    *newcomm = loom::shrinkComm(*comm, std::span<const int>(excludeRanksList, static_cast<size_t>(excludeRanksCount)), cfg)
                   .release();
  });
}

loomResult_t loomCommFinalize(loomComm_t comm) {
  bool inProgress = false;
  const loomResult_t result = call(__func__, comm, [&] {
    loomComm& c = ready(comm);
    if (c.config().blocking) return waitForStreamWork(c, "loomCommFinalize");
    // Non-blocking, as NCCL's: the wait goes on behind loomCommGetAsyncError.
    c.finalizeAsync([&c] { waitForStreamWork(c, "loomCommFinalize"); });
    inProgress = true;
  });
  return result == loomSuccess && inProgress ? loomInProgress : result;
}

loomResult_t loomCommDestroy(loomComm_t comm) {
  return call(__func__, nullptr, [&] {
    requireNonNull(comm, "comm");
    if (comm->asyncError() == loomSuccess) waitForStreamWork(*comm, "loomCommDestroy");
    delete comm;
  });
}

loomResult_t loomCommAbort(loomComm_t comm) {
  return call(__func__, nullptr, [&] {
    requireNonNull(comm, "comm");
    comm->abort();
    // Every wait watches the cancellation, so calls in flight leave promptly.
    while (comm->activeCalls.load(std::memory_order_acquire) != 0 ||
           comm->streamTasks.load(std::memory_order_acquire) != 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    delete comm;
  });
}

loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError) {
  return call(__func__, comm, [&] {
    requireNonNull(comm, "comm");
    requireNonNull(asyncError, "asyncError");
    *asyncError = comm->state();
  });
}

loomResult_t loomCommCount(const loomComm_t comm, int* count) {
  return call(__func__, comm, [&] {
    requireNonNull(count, "count");
    *count = ready(comm).size();
  });
}

loomResult_t loomCommUserRank(const loomComm_t comm, int* rank) {
  return call(__func__, comm, [&] {
    requireNonNull(rank, "rank");
    *rank = ready(comm).rank();
  });
}

loomResult_t loomCommLocalRank(const loomComm_t comm, int* localRank) {
  return call(__func__, comm, [&] {
    requireNonNull(localRank, "localRank");
    *localRank = ready(comm).localRank();
  });
}

loomResult_t loomCommLocalCount(const loomComm_t comm, int* localCount) {
  return call(__func__, comm, [&] {
    requireNonNull(localCount, "localCount");
    *localCount = ready(comm).localSize();
  });
}

loomResult_t loomCommCuDevice(const loomComm_t comm, int* device) {
  return call(__func__, comm, [&] {
    requireNonNull(device, "device");
    const int d = ready(comm).cudaDevice();
    if (d < 0) {
      throw loom::Error(loomInvalidUsage, "this communicator's rank has no CUDA device (none was visible where it was created)");
    }
    *device = d;
  });
}

loomResult_t loomCommBarrier(loomComm_t comm) {
  return call(__func__, comm, [&] {
    loomComm& c = ready(comm);
    loom::LogRankScope scope(c.rank());
    c.bootstrap().barrier();
  });
}

}  // extern "C"
