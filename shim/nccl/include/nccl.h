/* nccl.h for Loom's libnccl.so.2: NCCL's host API, binary-compatible, over
 * Loom (shim/nccl/). Written for this project from NCCL's public documentation
 * and header: the enum values, struct layouts, macros and function signatures
 * are NCCL's (facts of its ABI); the words and the implementation are Loom's.
 *
 * Version: this header and ncclGetVersion report 2.27.7. NCCL 2.28 added a
 * device API (nccl_device.h) that programs such as nccl-tests include whenever
 * NCCL_VERSION_CODE >= 2.28, and Loom does not offer it; the host API here is
 * that of NCCL's newer headers all the same (every function NCCL 2.30 and
 * 2.31 declare; structs are append-only, and a config is read up to the size
 * its caller set). What Loom cannot serve yet returns ncclInvalidUsage, and
 * ncclGetLastError says what is missing.
 *
 * Host pointers are accepted wherever NCCL takes device pointers (a Loom
 * extension), so CPU programs use the same ABI. */
#ifndef NCCL_H_
#define NCCL_H_

/* NCCL's header brings in CUDA's runtime and its half, bfloat16 and (for C++)
 * fp8 types, and programs written for it use them without including them
 * (nccl-tests' `half`); so does this one wherever CUDA's headers are found.
 * A C program built without CUDA gets only the stream type. */
#if defined(__has_include)
#if __has_include(<cuda_runtime.h>) && !defined(LOOM_NCCL_NO_CUDA)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#define LOOM_NCCL_HAVE_CUDA_TYPES 1
#endif
#endif
#ifndef LOOM_NCCL_HAVE_CUDA_TYPES
/* The same type as CUDA's, so that the ABI is the same with or without it. */
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 7
#define NCCL_SUFFIX "loom"

#define NCCL_VERSION_CODE 22707
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* Loom's additions to NCCL's enums below (names ending in _loom_): the least
 * and the largest int, which change no value or size (every enum here is an
 * int) but make every int a value of the enum for C++, so that a bad value a
 * C program passes is one Loom may read and refuse by name. */
typedef enum {
  ncclResultMin_loom_ = INT_MIN,
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9,
  ncclResultMax_loom_ = INT_MAX
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
#define NCCL_API_MAGIC 0xcafebeef

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_GIN_ONLY 0x04
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00
#define NCCL_SUSPEND_MEM 0x01

typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;

typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* A communicator's configuration, fields in NCCL's order (append-only across
 * versions; a library reads only the first `size` bytes). Loom honours
 * blocking; the others are accepted and, having no Loom meaning, ignored. */
typedef struct ncclConfig_v23100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;
  int nvlsHostMode;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                                      \
  {                                                                                                                  \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                  \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                  \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                  \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                  \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                  \
        NCCL_CONFIG_UNDEF_INT                                                                                        \
  }

/* A vendor's option for one collective (ncclCollConfig_t.ext); Loom reads none. */
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

/* One collective's configuration (the nccl*Config calls); Loom checks its
 * header and otherwise runs the collective as the plain call does. */
typedef struct ncclCollConfig_v23100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext;
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection;
  int forceAlgSelection;
  int CTAPolicy;
  uint64_t userProfilerTag;
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                                                  \
  {                                                                                                                  \
    sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,       \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, 1,               \
        NCCL_CONFIG_UNDEF_INT, 0                                                                                     \
  }

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

typedef enum {
  ncclCommMemStatMin_loom_ = INT_MIN,
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3,
  ncclCommMemStatMax_loom_ = INT_MAX
} ncclCommMemStat_t;

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclRedOpMin_loom_ = INT_MIN,
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* the first value of the operators ncclRedOpCreatePreMulSum makes */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclDataTypeMin_loom_ = INT_MIN,
  ncclInt8 = 0, ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2, ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6, ncclHalf = 6,
  ncclFloat32 = 7, ncclFloat = 7,
  ncclFloat64 = 8, ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10, /* Loom reduces neither fp8 type yet: ncclInvalidArgument */
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12,
  ncclDataTypeMax_loom_ = INT_MAX
} ncclDataType_t;

typedef enum {
  ncclScalarResidenceMin_loom_ = INT_MIN,
  ncclScalarDevice = 0,
  ncclScalarHostImmediate = 1,
  ncclScalarResidenceMax_loom_ = INT_MAX
} ncclScalarResidence_t;

typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

typedef struct ncclParamHandle* ncclParamHandle_t;

/* Every function below is also exported as p<name> (pncclAllReduce, ...), as
 * NCCL's profiling interface expects; the nccl* names are weak aliases of them. */
#define LOOM_NCCL_API(ret, name, args) \
  ret name args;                       \
  ret p##name args

LOOM_NCCL_API(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size));
LOOM_NCCL_API(ncclResult_t, ncclMemFree, (void* ptr));
LOOM_NCCL_API(ncclResult_t, ncclGetVersion, (int* version));
LOOM_NCCL_API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId* uniqueId));
LOOM_NCCL_API(ncclResult_t, ncclCommInitRankConfig,
              (ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclCommInitRank, (ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank));
LOOM_NCCL_API(ncclResult_t, ncclCommInitAll, (ncclComm_t* comm, int ndev, const int* devlist));
LOOM_NCCL_API(ncclResult_t, ncclCommInitRankScalable,
              (ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
LOOM_NCCL_API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
LOOM_NCCL_API(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
LOOM_NCCL_API(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
LOOM_NCCL_API(ncclResult_t, ncclCommSplit,
              (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclCommShrink,
              (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
               ncclConfig_t* config, int shrinkFlags));
LOOM_NCCL_API(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId));
LOOM_NCCL_API(ncclResult_t, ncclCommGrow,
              (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
               ncclConfig_t* config));
LOOM_NCCL_API(const char*, ncclGetErrorString, (ncclResult_t result));
LOOM_NCCL_API(const char*, ncclGetLastError, (ncclComm_t comm));
LOOM_NCCL_API(void, ncclResetDebugInit, (void));
LOOM_NCCL_API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError));
LOOM_NCCL_API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count));
LOOM_NCCL_API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device));
LOOM_NCCL_API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank));
LOOM_NCCL_API(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle));
LOOM_NCCL_API(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle));
LOOM_NCCL_API(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags));
LOOM_NCCL_API(ncclResult_t, ncclCommResume, (ncclComm_t comm));
LOOM_NCCL_API(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value));
LOOM_NCCL_API(ncclResult_t, ncclCommWindowRegister,
              (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags));
LOOM_NCCL_API(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
LOOM_NCCL_API(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr));
LOOM_NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum,
              (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
               ncclComm_t comm));
LOOM_NCCL_API(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));

LOOM_NCCL_API(ncclResult_t, ncclReduce,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
               ncclComm_t comm, cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclBcast,
              (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclBroadcast,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclAllReduce,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
               ncclComm_t comm, cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclReduceScatter,
              (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
               ncclComm_t comm, cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclAllGather,
              (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
               cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclAlltoAll,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
               cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclGather,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclScatter,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream));

LOOM_NCCL_API(ncclResult_t, ncclAllReduceConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclBroadcastConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclReduceConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclAllGatherConfig,
              (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
               cudaStream_t stream, const ncclCollConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclReduceScatterConfig,
              (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclAlltoAllConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
               cudaStream_t stream, const ncclCollConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclGatherConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
LOOM_NCCL_API(ncclResult_t, ncclScatterConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));

LOOM_NCCL_API(ncclResult_t, ncclSend,
              (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
               cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclRecv,
              (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
               cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclPutSignal,
              (const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
               size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclSignal,
              (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream));
LOOM_NCCL_API(ncclResult_t, ncclWaitSignal,
              (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream));

LOOM_NCCL_API(ncclResult_t, ncclGroupStart, (void));
LOOM_NCCL_API(ncclResult_t, ncclGroupEnd, (void));
LOOM_NCCL_API(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));

LOOM_NCCL_API(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char* key));
LOOM_NCCL_API(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out));
LOOM_NCCL_API(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out));
LOOM_NCCL_API(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out));
LOOM_NCCL_API(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out));
LOOM_NCCL_API(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out));
LOOM_NCCL_API(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out));
LOOM_NCCL_API(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out));
LOOM_NCCL_API(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out));
LOOM_NCCL_API(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out));
LOOM_NCCL_API(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len));
LOOM_NCCL_API(ncclResult_t, ncclParamGetParameter, (const char* key, const char** value, int* valueLen));
LOOM_NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen));
LOOM_NCCL_API(void, ncclParamDumpAll, (void));

#undef LOOM_NCCL_API

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
