// One probe, compiled twice: against NVIDIA's nccl.h (NCCL 2.28.9, under
// /usr/local/cuda) and against Loom's. Each prints every enum value, macro,
// struct size and field offset of NVIDIA's 2.28.9 header, one a line as
// "kind name number" (names without spaces); tests/shim/nccl_abi.sh compares the two. The list is
// NVIDIA's header's, so a name Loom lacks fails to compile here.
#include <nccl.h>

#include <cstddef>
#include <cstdio>

#define VALUE(x) std::printf("value %s %lld\n", #x, static_cast<long long>(x))
// A count that may grow with later versions (Loom's may be larger).
#define COUNT(x) std::printf("count %s %lld\n", #x, static_cast<long long>(x))
#define SIZE(T) std::printf("size %s %zu\n", #T, sizeof(T))
// A struct that is append-only across versions (Loom's may be larger).
#define GROWS(T) std::printf("grows %s %zu\n", #T, sizeof(T))
#define OFFSET(T, f) std::printf("offset %s.%s %zu\n", #T, #f, offsetof(T, f))

int main() {
  VALUE(ncclSuccess);
  VALUE(ncclUnhandledCudaError);
  VALUE(ncclSystemError);
  VALUE(ncclInternalError);
  VALUE(ncclInvalidArgument);
  VALUE(ncclInvalidUsage);
  VALUE(ncclRemoteError);
  VALUE(ncclInProgress);
  COUNT(ncclNumResults);
  SIZE(ncclResult_t);

  VALUE(ncclSum);
  VALUE(ncclProd);
  VALUE(ncclMax);
  VALUE(ncclMin);
  VALUE(ncclAvg);
  VALUE(ncclNumOps);
  VALUE(ncclMaxRedOp);
  SIZE(ncclRedOp_t);

  VALUE(ncclInt8);
  VALUE(ncclChar);
  VALUE(ncclUint8);
  VALUE(ncclInt32);
  VALUE(ncclInt);
  VALUE(ncclUint32);
  VALUE(ncclInt64);
  VALUE(ncclUint64);
  VALUE(ncclFloat16);
  VALUE(ncclHalf);
  VALUE(ncclFloat32);
  VALUE(ncclFloat);
  VALUE(ncclFloat64);
  VALUE(ncclDouble);
  VALUE(ncclBfloat16);
  VALUE(ncclFloat8e4m3);
  VALUE(ncclFloat8e5m2);
  VALUE(ncclNumTypes);
  SIZE(ncclDataType_t);

  VALUE(ncclScalarDevice);
  VALUE(ncclScalarHostImmediate);
  SIZE(ncclScalarResidence_t);

  VALUE(NCCL_MAJOR);
  VALUE(NCCL_UNIQUE_ID_BYTES);
  VALUE(NCCL_CONFIG_UNDEF_INT);
  VALUE(NCCL_SPLIT_NOCOLOR);
  VALUE(NCCL_WIN_DEFAULT);
  VALUE(NCCL_WIN_COLL_SYMMETRIC);
  VALUE(NCCL_WIN_REQUIRED_ALIGNMENT);
  VALUE(NCCL_CTA_POLICY_DEFAULT);
  VALUE(NCCL_CTA_POLICY_EFFICIENCY);
  VALUE(NCCL_CTA_POLICY_ZERO);
  VALUE(NCCL_SHRINK_DEFAULT);
  VALUE(NCCL_SHRINK_ABORT);
  VALUE(NCCL_REVOKE_DEFAULT);
  VALUE(NCCL_VERSION(2,28,9));
  VALUE(NCCL_VERSION(2,8,4));

  SIZE(ncclUniqueId);
  SIZE(ncclComm_t);
  SIZE(ncclWindow_t);

  GROWS(ncclConfig_t);
  OFFSET(ncclConfig_t, size);
  OFFSET(ncclConfig_t, magic);
  OFFSET(ncclConfig_t, version);
  OFFSET(ncclConfig_t, blocking);
  OFFSET(ncclConfig_t, cgaClusterSize);
  OFFSET(ncclConfig_t, minCTAs);
  OFFSET(ncclConfig_t, maxCTAs);
  OFFSET(ncclConfig_t, netName);
  OFFSET(ncclConfig_t, splitShare);
  OFFSET(ncclConfig_t, trafficClass);
  OFFSET(ncclConfig_t, commName);
  OFFSET(ncclConfig_t, collnetEnable);
  OFFSET(ncclConfig_t, CTAPolicy);
  OFFSET(ncclConfig_t, shrinkShare);
  OFFSET(ncclConfig_t, nvlsCTAs);
  OFFSET(ncclConfig_t, nChannelsPerNetPeer);
  OFFSET(ncclConfig_t, nvlinkCentricSched);
  const ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  VALUE(config.magic);
  VALUE(config.blocking);
  VALUE(config.splitShare);
  VALUE(config.commName==nullptr);

  GROWS(ncclSimInfo_t);
  OFFSET(ncclSimInfo_t, size);
  OFFSET(ncclSimInfo_t, magic);
  OFFSET(ncclSimInfo_t, version);
  OFFSET(ncclSimInfo_t, estimatedTime);
  const ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  VALUE(sim.size==sizeof(ncclSimInfo_t));
  VALUE(sim.magic);
  VALUE(sim.estimatedTime);
  return 0;
}
