// The C API boundary: runs a body, turns any loom::Error into its
// loomResult_t and records the message for loomGetLastError. Nothing throws
// across the boundary.
#pragma once

#include <loom/loom.h>

#include <string>

#include "base/datatype.hpp"
#include "base/error.hpp"
#include "comm/communicator.hpp"
#include "comm/engine/event.hpp"
#include "comm/engine/stream.hpp"
#include "memory/memory_kind.hpp"

namespace loom::api {

// Records a failure for loomGetLastError(comm) and for this thread.
void recordError(loomComm_t comm, loomResult_t code, const std::string& message, const char* function);
const char* lastErrorFor(loomComm_t comm);

// Throws loomInvalidArgument "<function>: <name> is NULL" when p is null.
// Inline, as every call asks; the message is built out of line.
[[noreturn]] void throwNull(const char* name);
inline void requireNonNull(const void* p, const char* name) {
  if (p == nullptr) throwNull(name);
}

// A buffer argument of `bytes` (nothing to check when 0): loomInvalidArgument
// naming it if it is NULL or runs past the address space. Returns its kind
// (a CUDA device's memory reaches the data path through pinned copies).
inline memory::MemoryKind requireBuffer(const void* p, size_t bytes, const char* name) {
  if (bytes == 0) return memory::MemoryKind::Host;
  requireNonNull(p, name);
  requireInAddressSpace(p, bytes, name);
  return memory::kindOf(p, bytes);
}

// Throws unless `comm` is a usable communicator.
loomComm& ready(loomComm_t comm);
// Throws unless `comm` finished its init; a revoked one passes (queries
// about a failure, shrink).
loomComm& initialized(loomComm_t comm);

// The host stream behind `stream`: null for NULL, loomInvalidArgument naming
// "stream" for anything that is not a live loom host stream.
HostStream* hostStream(loomStream_t stream);
// The stream a call runs on: null for NULL (blocking), a loom host stream,
// or, where a CUDA device is visible, anything else as a cudaStream_t
// (comm/engine/cuda_stream.hpp); loomInvalidArgument naming "stream" otherwise.
HostStream* callStream(loomStream_t stream);
// The event behind `event`; loomInvalidArgument naming "event" for NULL or
// anything that is not a live event (loomEventCreate).
HostEvent& liveEvent(loomEvent_t event);
// Whether `stream` is a cudaStream_t (neither NULL nor a loom host stream);
// loomInvalidArgument, as callStream's, where no CUDA device is visible.
bool isCudaStream(loomStream_t stream);

// The API trace: with LOOM_DEBUG=INFO and COLL among LOOM_DEBUG_SUBSYS
// (through libnccl.so.2, NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL), every
// call logs one line as it returns: its name, the arguments its entry noted
// (traceArguments), its communicator and rank, and its result. For a client
// on a machine nobody here can log into.
bool tracing();
// This thread's current call's arguments, printf-style, for its trace line.
// Entries note them only when tracing(), so the hot path formats nothing.
void traceArguments(const char* format, ...) __attribute__((format(printf, 1, 2)));
void traceCall(const char* function, loomComm_t comm, loomResult_t result);

template <class Body>
loomResult_t call(const char* function, loomComm_t comm, Body&& body) noexcept {
  if (comm != nullptr) comm->activeCalls.fetch_add(1, std::memory_order_acq_rel);
  loomResult_t result = loomSuccess;
  try {
    body();
  } catch (const Error& e) {
    result = e.code();
    recordError(comm, result, e.what(), function);
    if (comm != nullptr && result == loomRemoteError) comm->revoke(std::string(e.what()));
  } catch (const std::bad_alloc&) {
    result = loomSystemError;
    recordError(comm, result, "out of memory", function);
  } catch (const std::exception& e) {
    result = loomInternalError;
    recordError(comm, result, e.what(), function);
  } catch (...) {
    result = loomInternalError;
    recordError(comm, result, "unknown exception", function);
  }
  if (tracing()) traceCall(function, comm, result);
  if (comm != nullptr) comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
  return result;
}

}  // namespace loom::api
