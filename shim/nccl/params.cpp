// NCCL's parameter API reads NCCL's own tunables by name; Loom's live in
// the LOOM_* table (docs/configuration.md), so the typed getters say so, and a dump lists
// the NCCL_* variables this library maps onto Loom's (environment.cpp).
#include <cstdio>
#include <cstdlib>

#include "shim/nccl/shim.hpp"

using namespace loom::nccl;

namespace {

constexpr const char* kParams = "NCCL's parameters by name (Loom's settings are its LOOM_* variables)";

}  // namespace

LOOM_NCCL_DEFINE(ncclResult_t, ncclParamBind, (ncclParamHandle_t * /*out*/, const char* /*key*/)) {
  return unsupported("ncclParamBind", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t /*h*/, int8_t* /*out*/)) {
  return unsupported("ncclParamGetI8", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t /*h*/, int16_t* /*out*/)) {
  return unsupported("ncclParamGetI16", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t /*h*/, int32_t* /*out*/)) {
  return unsupported("ncclParamGetI32", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t /*h*/, int64_t* /*out*/)) {
  return unsupported("ncclParamGetI64", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t /*h*/, uint8_t* /*out*/)) {
  return unsupported("ncclParamGetU8", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t /*h*/, uint16_t* /*out*/)) {
  return unsupported("ncclParamGetU16", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t /*h*/, uint32_t* /*out*/)) {
  return unsupported("ncclParamGetU32", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t /*h*/, uint64_t* /*out*/)) {
  return unsupported("ncclParamGetU64", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t /*h*/, const char** /*out*/)) {
  return unsupported("ncclParamGetStr", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGet, (ncclParamHandle_t /*h*/, void* /*out*/, int /*maxLen*/, int* /*len*/)) {
  return unsupported("ncclParamGet", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetParameter,
                 (const char* /*key*/, const char** /*value*/, int* /*valueLen*/)) {
  return unsupported("ncclParamGetParameter", kParams);
}
LOOM_NCCL_DEFINE(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** /*table*/, int* /*tableLen*/)) {
  return unsupported("ncclParamGetAllParameterKeys", kParams);
}

LOOM_NCCL_DEFINE(void, ncclParamDumpAll, (void)) {
  for (const char* name : mappedVariables()) {
    const char* value = std::getenv(name);
    std::fprintf(stderr, "loom (libnccl.so.2): %s=%s\n", name, value != nullptr ? value : "(unset)");
  }
}
