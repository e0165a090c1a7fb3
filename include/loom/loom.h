/*
 * Loom: collective communication for CPUs and GPUs. Plain C, usable from C and C++.
 *
 * Names mirror NCCL's with "nccl" replaced by "loom", so that code written for
 * one reads the same in the other. Every call returns a loomResult_t; on
 * failure loomGetLastError(comm) says which argument or peer was at fault.
 * Nothing here throws.
 */
#ifndef LOOM_LOOM_H
#define LOOM_LOOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MAJOR 0
#define LOOM_MINOR 1
#define LOOM_PATCH 0
#define LOOM_VERSION_CODE (LOOM_MAJOR * 10000 + LOOM_MINOR * 100 + LOOM_PATCH)

typedef enum {
  loomSuccess = 0,
  loomUnhandledCudaError = 1,
  loomSystemError = 2,
  loomInternalError = 3,
  loomInvalidArgument = 4,
  loomInvalidUsage = 5,
  loomRemoteError = 6,
  loomInProgress = 7,
  loomTimeout = 8,
  loomNumResults = 9
} loomResult_t;

typedef enum {
  loomInt8 = 0, loomChar = 0,
  loomUint8 = 1,
  loomInt32 = 2, loomInt = 2,
  loomUint32 = 3,
  loomInt64 = 4,
  loomUint64 = 5,
  loomFloat16 = 6, loomHalf = 6,
  loomFloat32 = 7, loomFloat = 7,
  loomFloat64 = 8, loomDouble = 8,
  loomBfloat16 = 9,
  loomNumTypes = 10,
  /* These two make every int a value of the type, negative ones too, so that
   * a bad one from C is still a value C++ may read, and is refused by name. */
  loomMinDataType = -0x7fffffff - 1,
  loomMaxDataType = 0x7fffffff
} loomDataType_t;

typedef enum {
  loomSum = 0,
  loomProd = 1,
  loomMax = 2,
  loomMin = 3,
  loomAvg = 4,
  loomNumOps = 5,
  loomMinRedOp = -0x7fffffff - 1, /* every int a value, as for loomDataType_t */
  loomMaxRedOp = 0x7fffffff
} loomRedOp_t;

/* Where loomRedOpCreatePreMulSum finds its scalar: read through the pointer
 * at every call (Device: for host communicators, memory the pointer keeps
 * valid), or copied once at creation (HostImmediate). */
typedef enum {
  loomScalarDevice = 0,
  loomScalarHostImmediate = 1,
  loomMinScalarResidence = -0x7fffffff - 1, /* every int a value, as for loomDataType_t */
  loomMaxScalarResidence = 0x7fffffff
} loomScalarResidence_t;

/* Opaque handles. A stream is NULL (blocking), a loom host stream, or a
 * cudaStream_t cast to loomStream_t. */
typedef struct loomComm* loomComm_t;
typedef struct loomStreamImpl* loomStream_t;
typedef struct loomEventImpl* loomEvent_t;

#define LOOM_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[LOOM_UNIQUE_ID_BYTES];
} loomUniqueId;

/* The most bytes one buffer argument may span (128 TiB, the x86-64 user
 * address space): a count x datatype size (x nranks for the n-block buffers)
 * above it is refused with loomInvalidArgument naming the count, as is a
 * buffer whose end would wrap the address space. */
#define LOOM_MAX_BUFFER_BYTES 0x800000000000ULL /* 2^47 */

#define LOOM_SPLIT_NOCOLOR (-1)
#define LOOM_CONFIG_UNDEF_INT (-2147483647 - 1)

/* Per-communicator settings. Fields left at LOOM_CONFIG_UNDEF_INT take the
 * environment's value (LOOM_TIMEOUT_MS, ...) or the documented default. */
typedef struct {
  size_t size;          /* sizeof(loomConfig_t), set by the initializer */
  unsigned int magic;   /* set by the initializer */
  unsigned int version; /* set by the initializer */
  int blocking;         /* 1 (default): init returns when done; 0: returns loomInProgress */
  int timeoutMs;        /* deadline of every wait; overrides LOOM_TIMEOUT_MS */
  int deterministic;    /* 1: float reductions fold in rank order, bitwise reproducible
                           across algorithms and sizes; overrides LOOM_DETERMINISTIC */
} loomConfig_t;

#define LOOM_CONFIG_MAGIC 0x4c4f4f4du /* "LOOM" */
#define LOOM_CONFIG_INITIALIZER                                                   \
  {                                                                               \
    sizeof(loomConfig_t), LOOM_CONFIG_MAGIC, LOOM_VERSION_CODE,                   \
        LOOM_CONFIG_UNDEF_INT, LOOM_CONFIG_UNDEF_INT, LOOM_CONFIG_UNDEF_INT       \
  }

/* Versions and errors. */
loomResult_t loomGetVersion(int* version);
const char* loomGetErrorString(loomResult_t result);
/* The message of the last failed call on comm, or of this thread's last failed
 * call when comm is NULL (init failures have no communicator yet). */
const char* loomGetLastError(loomComm_t comm);

/* Host buffers that the ranks of one node read in place: the shared-memory
 * collectives skip copying them into the node's segment when every local
 * rank's buffers come from here. Zero-filled; size > 0. Free with loomMemFree
 * (not free()). */
loomResult_t loomMemAlloc(void** ptr, size_t size);
/* Device memory on the calling thread's current CUDA device (cudaMalloc; not
 * zero-filled), as ncclMemAlloc gives; size > 0. loomInvalidUsage where no
 * CUDA device is visible. Free with loomMemFree (not cudaFree()). */
loomResult_t loomMemAllocDevice(void** ptr, size_t size);
/* Frees what loomMemAlloc or loomMemAllocDevice returned. */
loomResult_t loomMemFree(void* ptr);

/* Symmetric windows (NCCL 2.27's ncclCommWindowRegister): collective; every
 * rank registers a buffer of the same size (loomInvalidArgument naming the
 * ranks otherwise), and each rank maps every other's once, here. With
 * LOOM_WIN_COLL_SYMMETRIC, a collective on a CUDA stream whose send buffer
 * lies in such a window at the same offset on every rank (the caller's
 * promise, as NCCL asks it) reads the peers' inputs in place, skipping the
 * copy into the resident scratch (docs/gpu.md). Host buffers, or ranks whose
 * devices cannot reach each other, register too and are not read in place.
 * Deregister collectively, once no call on the window is still queued. */
typedef struct loomWindowImpl* loomWindow_t;
#define LOOM_WIN_DEFAULT 0x00
#define LOOM_WIN_COLL_SYMMETRIC 0x01
loomResult_t loomCommWindowRegister(loomComm_t comm, void* buff, size_t size, loomWindow_t* win, int flags);
loomResult_t loomCommWindowDeregister(loomComm_t comm, loomWindow_t win);
/* The buffer `win` was registered with. */
loomResult_t loomWinGetUserPtr(loomComm_t comm, loomWindow_t win, void** ptr);

/* Communicator creation. loomGetUniqueId starts the rendezvous root in the
 * calling process; the id carries its address and a random secret. */
loomResult_t loomGetUniqueId(loomUniqueId* uniqueId);
loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId, int rank);
loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId, int rank,
                                    loomConfig_t* config);
/* ndev communicators in this process (ranks as threads), rank i on CUDA
 * device devlist[i] (devlist NULL: i mod the visible devices; several ranks
 * may share a device). Where no CUDA device is visible, devlist is ignored.
 * loomInvalidArgument naming the devlist entry that is no visible device. */
loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist);
/* Rank, size and rendezvous from the launcher's environment (loomrun,
 * torchrun, Slurm, Open MPI, PMI); see docs/api.md for the order. */
loomResult_t loomCommInitFromEnv(loomComm_t* comm, loomConfig_t* config);
loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm,
                           loomConfig_t* config);
/* A communicator of comm's ranks less the excludeRanksCount ranks listed,
 * renumbered in order: how a job goes on after a rank failed. Every rank not
 * excluded calls it with the same list; excluded ranks do not call it. It
 * works on a communicator revoked by a peer's failure. LOOM_SHRINK_ABORT
 * first aborts operations still in flight on comm (from other threads or
 * streams); with LOOM_SHRINK_DEFAULT there must be none. comm stays valid
 * (destroy or abort it afterwards); config NULL inherits comm's settings. */
#define LOOM_SHRINK_DEFAULT 0x00
#define LOOM_SHRINK_ABORT 0x01
loomResult_t loomCommShrink(loomComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            loomComm_t* newcomm, loomConfig_t* config, int shrinkFlags);

/* Teardown. Finalize completes outstanding work (on a non-blocking
 * communicator it returns loomInProgress and loomCommGetAsyncError turns to
 * loomSuccess when the work is done, as NCCL's); Destroy frees; Abort may be
 * called from any thread and unblocks every wait on comm at once, then frees.
 * A rank whose communicator is aborted, or whose process dies, counts as
 * failed for its peers: their operations on the communicator then fail with
 * loomRemoteError naming it (and loomCommGetAsyncError reports it), within
 * about a millisecond of a process's death, or after 5 x LOOM_HEARTBEAT_MS
 * of silence from a stopped one. */
loomResult_t loomCommFinalize(loomComm_t comm);
loomResult_t loomCommDestroy(loomComm_t comm);
loomResult_t loomCommAbort(loomComm_t comm);
loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError);

/* Queries. */
loomResult_t loomCommCount(const loomComm_t comm, int* count);
loomResult_t loomCommUserRank(const loomComm_t comm, int* rank);
/* Loom extensions: ranks on the same host (same host id). */
loomResult_t loomCommLocalRank(const loomComm_t comm, int* localRank);
loomResult_t loomCommLocalCount(const loomComm_t comm, int* localCount);
/* The CUDA device this rank was created on: the one current on the thread
 * that created it (loomCommInitAll: its devlist's), as NCCL's
 * ncclCommCuDevice. A call on device memory runs on the device current
 * where it is made (in a group, where each call was made). loomInvalidUsage
 * if no CUDA device was visible there; naming "device" if it is NULL. */
loomResult_t loomCommCuDevice(const loomComm_t comm, int* device);

/* Loom extension: where a peer runs and how this rank reaches it, for tools
 * (loom-perf's rank lines, loom-diag's per-pair attribution). Every string is
 * NUL-terminated, cut to fit. Fields a build or machine cannot know are -1 or
 * empty. The struct only grows at its end. */
typedef struct {
  int rank;           /* the peer's rank in comm */
  int pid;            /* its process id on its host */
  char host[64];      /* its hostname */
  int sameHost;       /* 1: on this rank's host (same host id), 0: elsewhere */
  int localRank;      /* its rank among the ranks of its host */
  int localCount;     /* the ranks of its host */
  int numaNode;       /* the NUMA node it is placed on, -1 unknown */
  int gpu;            /* the GPU it is placed on, -1 none */
  char nic[32];       /* the NIC placement chose for it, "" none */
  char transport[16]; /* what carries this rank's messages to it: "self", "shm", "socket" */
} loomPeerInfo_t;
/* Works on a communicator revoked by a failure. loomInvalidArgument naming
 * "peer" unless 0 <= peer < the communicator's count, naming "info" if it is
 * NULL. */
loomResult_t loomCommGetPeerInfo(const loomComm_t comm, int peer, loomPeerInfo_t* info);

/* Loom extension: the ranks this rank knows to have failed (its watchdog
 * declared them, or was told), in the order it learned of them: what
 * loomCommShrink's survivors exclude, and what a tool names after a failure.
 * Writes the first min(count, maxRanks) to ranks and their number to *count.
 * Works on a communicator revoked by a failure, as loomCommGetPeerInfo does.
 * loomInvalidArgument naming "count" if it is NULL, "maxRanks" if negative,
 * "ranks" if NULL while maxRanks > 0. */
loomResult_t loomCommGetFailedRanks(const loomComm_t comm, int* ranks, int maxRanks, int* count);

/* Loom extension: how this process's calls ran, since it began, as a count
 * by name: the path a call took, which its result cannot show (a call staged
 * through the host and one run on the stream give the same bits). For tools
 * and tests. The names:
 *   resident_calls                   collectives queued on a CUDA stream as
 *                                    device work, no host thread in the loop
 *   resident_calls_in_windows        of those, read in symmetric windows
 *   resident_calls_offered_in_place  of those, whose rank let its peers read
 *                                    its input where it lies (no scratch)
 *   resident_whole_calls             of those, run as one piece
 *   resident_p2p_ops                 sends and receives queued on a stream
 *   resident_sends_read_in_place     of those sends, read by their receivers
 *                                    from the sender's buffer
 *   bytes_taken_by_handle            bytes receivers copied straight from
 *                                    their senders' device buffers (by handle)
 *   staged_pieces                    pieces of calls staged through the host
 *                                    in turn, copies beside them
 *   host_kernel_bytes                bytes the host's stand-ins for device
 *                                    kernels wrote (only without a GPU's)
 * loomInvalidArgument naming "name" (and listing these) if it is none of them,
 * NULL, naming "value" if it is NULL. */
loomResult_t loomGetCounter(const char* name, uint64_t* value);

/* Loom extension: an out-of-band barrier over the bootstrap network (no data
 * path involved), for tests, tools and start-up synchronization. */
loomResult_t loomCommBarrier(loomComm_t comm);

/* Host streams: work enqueued on one runs in order on its own thread,
 * asynchronously to the caller; different streams run concurrently. A NULL
 * stream makes every call block until its work is done. Synchronize returns
 * the first error of the stream's work since the previous synchronize. */
loomResult_t loomStreamCreate(loomStream_t* stream);
loomResult_t loomStreamSynchronize(loomStream_t stream);
/* Finishes the stream's queued work, then frees it. */
loomResult_t loomStreamDestroy(loomStream_t stream);

/* Events on host streams, as CUDA's on its streams, to overlap work with
 * communication and ask whether it is done without waiting. Record marks
 * the point the stream's queue has reached (NULL: a blocking stream, whose
 * point is reached at once); recording again marks a new point. Query
 * returns loomSuccess once the stream's work up to the last recorded point
 * has run (or if none was recorded), loomInProgress before; Synchronize
 * waits for it; StreamWaitEvent makes the stream's later work wait for the
 * point recorded before the call. A stream's errors stay the stream's
 * (loomStreamSynchronize). Destroy may come before the point is reached.
 * Loom host streams only: a CUDA stream has cudaEvent_t. */
loomResult_t loomEventCreate(loomEvent_t* event);
loomResult_t loomEventRecord(loomEvent_t event, loomStream_t stream);
loomResult_t loomEventQuery(loomEvent_t event);
loomResult_t loomEventSynchronize(loomEvent_t event);
loomResult_t loomStreamWaitEvent(loomStream_t stream, loomEvent_t event);
loomResult_t loomEventDestroy(loomEvent_t event);

/* Point-to-point. A message of count x datatype bytes; the receiver's count
 * and datatype size must match the sender's (loomInvalidUsage otherwise).
 * Between one pair of ranks, messages arrive in the order they were sent.
 * count 0 is a real (empty) message, and peer may be the caller's own rank
 * (in a group, to be received by a matching loomRecv). */
loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream);
loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream);

/* Calls between GroupStart and GroupEnd (which nest) are posted together at
 * the outermost GroupEnd, so sends and receives to many peers cannot deadlock
 * on each other. Calls on a NULL stream complete before GroupEnd returns;
 * their first error is GroupEnd's result. One thread may post for several
 * ranks of its process (loomCommInitAll, then one call per rank in a group,
 * as with one thread driving several GPUs): each rank's share runs at once.
 * loomCommInitRank(Config) and loomCommSplit called inside a group return
 * at once and run at the outermost GroupEnd, all together and before the
 * group's calls (so one thread may create several ranks, each under its own
 * CUDA device); a split's newcomm is set then. GroupEnd returns
 * loomInProgress when one of them is non-blocking (config.blocking = 0):
 * poll loomCommGetAsyncError on it until loomSuccess. */
loomResult_t loomGroupStart(void);
loomResult_t loomGroupEnd(void);

/* Reduction ops beyond the built-in ones: each rank's input is multiplied by
 * that rank's scalar (of type datatype) before the sum. The op belongs to
 * comm; it is valid only there and only with datatype. */
loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t* op, void* scalar, loomDataType_t datatype,
                                      loomScalarResidence_t residence, loomComm_t comm);
loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm);

/* Collectives. Every rank of comm calls the same collectives in the same
 * order with matching counts, datatype, op and root. Counts are in elements:
 * per rank's block for AllGather (sendcount), ReduceScatter (recvcount),
 * Gather, Scatter and AlltoAll (per peer); each buffer's bytes must be at
 * most LOOM_MAX_BUFFER_BYTES.
 * Buffers used only on the root (Broadcast's sendbuff, Reduce's and Gather's
 * recvbuff, Scatter's sendbuff) are ignored on the other ranks. sendbuff and
 * recvbuff may overlap only in place, NCCL's rules:
 *   Broadcast, Reduce, AllReduce  sendbuff == recvbuff
 *   AllGather                     sendbuff == recvbuff + rank * sendcount
 *   ReduceScatter                 recvbuff == sendbuff + rank * recvcount
 *   Gather (on the root)          sendbuff == recvbuff + root * sendcount
 *   Scatter (on the root)         recvbuff == sendbuff + root * recvcount
 *   AlltoAll                      never: the buffers must not overlap
 * (offsets in elements); any other overlap is loomInvalidArgument.
 * Ranks that disagree (another collective, count, datatype, op or root) fail
 * with loomInvalidUsage naming a peer and both calls, as soon as a message
 * between them shows it or a waiting rank asks the peer it waits for (after
 * about 100 ms), not at the deadline; the communicator is then unusable (its
 * connections hold the other call's data) and every later call on it fails
 * the same way. A rank whose part needed nothing from the others may finish
 * first and learn of it from loomCommGetAsyncError or its next call.
 * LOOM_CHECK=1 compares every call's arguments before any data moves.
 * Avg sums, then divides the result by nranks: integers truncate toward zero
 * (after the sum wrapped, as sums of integers do); floats are multiplied by
 * 1/nranks, rounding once. */
loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, int root,
                           loomComm_t comm, loomStream_t stream);
loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, loomRedOp_t op,
                        int root, loomComm_t comm, loomStream_t stream);
loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                           loomRedOp_t op, loomComm_t comm, loomStream_t stream);
loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, loomDataType_t datatype,
                               loomRedOp_t op, loomComm_t comm, loomStream_t stream);
loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, loomDataType_t datatype,
                           loomComm_t comm, loomStream_t stream);
loomResult_t loomAlltoAll(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                          loomComm_t comm, loomStream_t stream);
loomResult_t loomGather(const void* sendbuff, void* recvbuff, size_t sendcount, loomDataType_t datatype, int root,
                        loomComm_t comm, loomStream_t stream);
loomResult_t loomScatter(const void* sendbuff, void* recvbuff, size_t recvcount, loomDataType_t datatype, int root,
                         loomComm_t comm, loomStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_LOOM_H */
