// What every file of the NCCL shim shares: how a function is defined under
// both its names, how NCCL's handles and enums become Loom's, and the
// shim's own errors (those of calls Loom cannot serve), which
// ncclGetLastError reports when they were this thread's last.
#pragma once

#include <loom/loom.h>

#include <span>
#include <string>

#include <nccl.h>

// Defines p<name> and makes <name> a weak alias of it: NCCL's profiling
// interface (a profiler may define <name> and call p<name>).
#define LOOM_NCCL_DEFINE(ret, name, params)                              \
  extern "C" ret name params __attribute__((weak, alias("p" #name)));   \
  extern "C" ret p##name params

namespace loom::nccl {

inline loomComm_t toLoom(ncclComm_t comm) { return reinterpret_cast<loomComm_t>(comm); }
inline ncclComm_t toNccl(loomComm_t comm) { return reinterpret_cast<ncclComm_t>(comm); }
inline loomStream_t toLoom(cudaStream_t stream) { return reinterpret_cast<loomStream_t>(stream); }
// Loom's results are NCCL's numbers, ncclTimeout included.
inline ncclResult_t toNccl(loomResult_t result) { return static_cast<ncclResult_t>(result); }

// A Loom call's result; a failure leaves Loom's message for ncclGetLastError.
ncclResult_t fromLoom(loomResult_t result);
// The shim's own failure: `code`, with `message` for ncclGetLastError.
ncclResult_t fail(ncclResult_t code, const std::string& message);
// What NCCL offers and Loom does not yet: ncclInvalidUsage naming the call.
ncclResult_t unsupported(const char* call, const char* what);
// The message ncclGetLastError gives for comm.
const char* lastError(ncclComm_t comm);

// NCCL_COMM_BLOCKING, for configs that leave blocking undefined
// (environment.cpp); NCCL_CONFIG_UNDEF_INT when unset.
int defaultBlocking();

// The NCCL_* variables environment.cpp maps onto Loom's, NCCL_COMM_BLOCKING
// included (what ncclParamDumpAll lists).
std::span<const char* const> mappedVariables();

// datatype as Loom's, or a failure naming it (fp8, or no type at all).
bool checkType(ncclDataType_t datatype, const char* call, ncclResult_t* failure);

}  // namespace loom::nccl
