// Collectives, point-to-point and reduction operators through NCCL's names.
// NCCL's data types, operators and results are Loom's numbers, so each call
// is Loom's with its handles cast; fp8 is refused by name (Loom has no fp8
// kernels yet), and Loom checks everything else, naming the argument.
#include <loom/loom.h>

#include <string>

#include "shim/nccl/shim.hpp"

namespace loom::nccl {
namespace {

static_assert(ncclInt8 == static_cast<int>(loomInt8) && ncclUint8 == static_cast<int>(loomUint8) &&
              ncclInt32 == static_cast<int>(loomInt32) && ncclUint32 == static_cast<int>(loomUint32) &&
              ncclInt64 == static_cast<int>(loomInt64) && ncclUint64 == static_cast<int>(loomUint64) &&
              ncclFloat16 == static_cast<int>(loomFloat16) && ncclFloat32 == static_cast<int>(loomFloat32) &&
              ncclFloat64 == static_cast<int>(loomFloat64) && ncclBfloat16 == static_cast<int>(loomBfloat16));
static_assert(ncclSum == static_cast<int>(loomSum) && ncclProd == static_cast<int>(loomProd) &&
              ncclMax == static_cast<int>(loomMax) && ncclMin == static_cast<int>(loomMin) &&
              ncclAvg == static_cast<int>(loomAvg));
static_assert(ncclScalarDevice == static_cast<int>(loomScalarDevice) &&
              ncclScalarHostImmediate == static_cast<int>(loomScalarHostImmediate));

loomDataType_t toLoom(ncclDataType_t type) { return static_cast<loomDataType_t>(type); }
loomRedOp_t toLoom(ncclRedOp_t op) { return static_cast<loomRedOp_t>(op); }

// A per-collective config is checked for its header; Loom has no per-call
// tuning, so a good one runs the plain call.
bool checkCollConfig(const ncclCollConfig_t* config, const char* call, ncclResult_t* failure) {
  if (config == nullptr) return true;
  if (config->magic != NCCL_API_MAGIC || config->size < offsetof(ncclCollConfig_t, ext) + sizeof(void*)) {
    *failure = fail(ncclInvalidArgument, std::string(call) +
                                             ": config was not set up with NCCL_COLLCONFIG_INITIALIZER (its magic or "
                                             "size is wrong)");
    return false;
  }
  return true;
}

}  // namespace
}  // namespace loom::nccl

using namespace loom::nccl;
using loom::nccl::toLoom;

#define LOOM_NCCL_TYPE_CHECK(call)                                  \
  if (ncclResult_t failure = ncclSuccess; !checkType(datatype, call, &failure)) return failure

LOOM_NCCL_DEFINE(ncclResult_t, ncclReduce,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                  int root, ncclComm_t comm, cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclReduce");
  return fromLoom(loomReduce(sendbuff, recvbuff, count, toLoom(datatype), toLoom(op), root, toLoom(comm),
                             toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclBcast,
                 (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclBcast");
  return fromLoom(loomBroadcast(buff, buff, count, toLoom(datatype), root, toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclBroadcast,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclBroadcast");
  return fromLoom(loomBroadcast(sendbuff, recvbuff, count, toLoom(datatype), root, toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclAllReduce,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                  ncclComm_t comm, cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclAllReduce");
  return fromLoom(
      loomAllReduce(sendbuff, recvbuff, count, toLoom(datatype), toLoom(op), toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclReduceScatter,
                 (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                  ncclComm_t comm, cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclReduceScatter");
  return fromLoom(
      loomReduceScatter(sendbuff, recvbuff, recvcount, toLoom(datatype), toLoom(op), toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclAllGather,
                 (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                  cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclAllGather");
  return fromLoom(loomAllGather(sendbuff, recvbuff, sendcount, toLoom(datatype), toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclAlltoAll,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                  cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclAlltoAll");
  return fromLoom(loomAlltoAll(sendbuff, recvbuff, count, toLoom(datatype), toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclGather,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclGather");
  return fromLoom(loomGather(sendbuff, recvbuff, count, toLoom(datatype), root, toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclScatter,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclScatter");
  return fromLoom(loomScatter(sendbuff, recvbuff, count, toLoom(datatype), root, toLoom(comm), toLoom(stream)));
}

#define LOOM_NCCL_COLL_CONFIG(call)                                                   \
  if (ncclResult_t failure = ncclSuccess; !checkCollConfig(config, call, &failure)) return failure

LOOM_NCCL_DEFINE(ncclResult_t, ncclAllReduceConfig,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config)) {
  LOOM_NCCL_COLL_CONFIG("ncclAllReduceConfig");
  return pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclBroadcastConfig,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config)) {
  LOOM_NCCL_COLL_CONFIG("ncclBroadcastConfig");
  return pncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclReduceConfig,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                  int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config)) {
  LOOM_NCCL_COLL_CONFIG("ncclReduceConfig");
  return pncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclAllGatherConfig,
                 (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                  cudaStream_t stream, const ncclCollConfig_t* config)) {
  LOOM_NCCL_COLL_CONFIG("ncclAllGatherConfig");
  return pncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclReduceScatterConfig,
                 (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config)) {
  LOOM_NCCL_COLL_CONFIG("ncclReduceScatterConfig");
  return pncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclAlltoAllConfig,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                  cudaStream_t stream, const ncclCollConfig_t* config)) {
  LOOM_NCCL_COLL_CONFIG("ncclAlltoAllConfig");
  return pncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclGatherConfig,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config)) {
  LOOM_NCCL_COLL_CONFIG("ncclGatherConfig");
  return pncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclScatterConfig,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config)) {
  LOOM_NCCL_COLL_CONFIG("ncclScatterConfig");
  return pncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclSend,
                 (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                  cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclSend");
  return fromLoom(loomSend(sendbuff, count, toLoom(datatype), peer, toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclRecv,
                 (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                  cudaStream_t stream)) {
  LOOM_NCCL_TYPE_CHECK("ncclRecv");
  return fromLoom(loomRecv(recvbuff, count, toLoom(datatype), peer, toLoom(comm), toLoom(stream)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclRedOpCreatePreMulSum,
                 (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                  ncclComm_t comm)) {
  LOOM_NCCL_TYPE_CHECK("ncclRedOpCreatePreMulSum");
  loomRedOp_t created = loomSum;
  const ncclResult_t r = fromLoom(loomRedOpCreatePreMulSum(op == nullptr ? nullptr : &created, scalar,
                                                           toLoom(datatype),
                                                           static_cast<loomScalarResidence_t>(residence),
                                                           toLoom(comm)));
  if (r == ncclSuccess) *op = static_cast<ncclRedOp_t>(created);
  return r;
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm)) {
  return fromLoom(loomRedOpDestroy(toLoom(op), toLoom(comm)));
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclPutSignal,
                 (const void* /*localbuff*/, size_t /*count*/, ncclDataType_t /*datatype*/, int /*peer*/,
                  ncclWindow_t /*peerWin*/, size_t /*peerWinOffset*/, int /*sigIdx*/, int /*ctx*/,
                  unsigned int /*flags*/, ncclComm_t /*comm*/, cudaStream_t /*stream*/)) {
  return unsupported("ncclPutSignal", "one-sided puts into memory windows");
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclSignal,
                 (int /*peer*/, int /*sigIdx*/, int /*ctx*/, unsigned int /*flags*/, ncclComm_t /*comm*/,
                  cudaStream_t /*stream*/)) {
  return unsupported("ncclSignal", "one-sided signals");
}

LOOM_NCCL_DEFINE(ncclResult_t, ncclWaitSignal,
                 (int /*nDesc*/, ncclWaitSignalDesc_t* /*signalDescs*/, ncclComm_t /*comm*/, cudaStream_t /*stream*/)) {
  return unsupported("ncclWaitSignal", "one-sided signals");
}
