#include <loom/loom.h>

#include <string>

#include "shim/nccl/shim.hpp"

namespace loom::nccl {
namespace {

// This thread's last failure, when it was the shim's; empty when it was
// Loom's (whose message Loom keeps per communicator and thread).
thread_local std::string tShimError;

}  // namespace

ncclResult_t fromLoom(loomResult_t result) {
  if (result != loomSuccess && result != loomInProgress) tShimError.clear();
  return toNccl(result);
}

ncclResult_t fail(ncclResult_t code, const std::string& message) {
  tShimError = message;
  return code;
}

ncclResult_t unsupported(const char* call, const char* what) {
  return fail(ncclInvalidUsage, std::string(call) + ": " + what + " is not offered by Loom's NCCL library yet");
}

const char* lastError(ncclComm_t comm) {
  if (!tShimError.empty()) return tShimError.c_str();
  return loomGetLastError(toLoom(comm));
}

bool checkType(ncclDataType_t datatype, const char* call, ncclResult_t* failure) {
  if (datatype == ncclFloat8e4m3 || datatype == ncclFloat8e5m2) {
    *failure = fail(ncclInvalidArgument, std::string(call) + ": datatype=" + std::to_string(datatype) +
                                             " (an fp8 type) is not one Loom reduces or moves yet");
    return false;
  }
  return true;  // anything else Loom checks itself, naming it
}

}  // namespace loom::nccl

using namespace loom::nccl;

LOOM_NCCL_DEFINE(const char*, ncclGetErrorString, (ncclResult_t result)) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO or LOOM_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO or LOOM_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the Loom developers";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError says which)";
    case ncclInvalidUsage: return "invalid usage (ncclGetLastError says what)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

LOOM_NCCL_DEFINE(const char*, ncclGetLastError, (ncclComm_t comm)) { return lastError(comm); }
