#include "api/api_call.hpp"

#include <cstdarg>
#include <cstdio>

#include "base/datatype.hpp"
#include "base/device/cuda.hpp"
#include "base/log.hpp"
#include "comm/engine/cuda_stream.hpp"

namespace loom::api {
namespace {
thread_local std::string tlsLastError;
thread_local std::string tlsReturned;  // keeps the string loomGetLastError hands out alive
thread_local std::string tlsArguments;  // the current call's, for its trace line
}  // namespace

bool tracing() { return logEnabled(LogLevel::Info, Subsys::Coll); }

void traceArguments(const char* format, ...) {
  char line[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  tlsArguments = line;
}

void traceCall(const char* function, loomComm_t comm, loomResult_t result) {
  if (comm != nullptr) {
    LOOM_INFO(Coll, "%s(%s) comm %p rank %d of %d: %s", function, tlsArguments.c_str(), static_cast<void*>(comm),
              comm->rank(), comm->size(), resultName(result));
  } else {
    LOOM_INFO(Coll, "%s(%s): %s", function, tlsArguments.c_str(), resultName(result));
  }
  tlsArguments.clear();
}

void recordError(loomComm_t comm, loomResult_t code, const std::string& message, const char* function) {
  std::string text = std::string(function) + ": " + message;
  if (code != loomInProgress) LOOM_WARN(Init, "%s (%s)", text.c_str(), resultName(code));
  tlsLastError = text;
  if (comm != nullptr) comm->setLastError(text);
}

const char* lastErrorFor(loomComm_t comm) {
  tlsReturned = comm != nullptr ? comm->lastError() : tlsLastError;
  return tlsReturned.c_str();
}

void throwNull(const char* name) { throw Error(loomInvalidArgument, std::string(name) + " is NULL"); }

loomComm& ready(loomComm_t comm) {
  requireNonNull(comm, "comm");
  comm->requireReady();
  return *comm;
}

loomComm& initialized(loomComm_t comm) {
  requireNonNull(comm, "comm");
  comm->requireInitialized();
  return *comm;
}

HostStream* hostStream(loomStream_t stream) {
  if (stream == nullptr) return nullptr;
  if (!HostStream::isLive(stream)) {
    throw Error(loomInvalidArgument, "stream is neither NULL nor a live loom host stream (loomStreamCreate)");
  }
  return stream;
}

HostEvent& liveEvent(loomEvent_t event) {
  if (event == nullptr || !HostEvent::isLive(event)) {
    throw Error(loomInvalidArgument, "event is not a live loom event (loomEventCreate)");
  }
  return *event;
}

bool isCudaStream(loomStream_t stream) {
  if (stream == nullptr || HostStream::isLive(stream)) return false;
  if (cuda::deviceCount() == 0) {
    throw Error(loomInvalidArgument,
                "stream is neither NULL nor a live loom host stream (loomStreamCreate), and no CUDA device is "
                "visible for it to be a cudaStream_t");
  }
  return true;
}

HostStream* callStream(loomStream_t stream) {
  if (!isCudaStream(stream)) return stream;
  return &CudaStreamTasks::of(static_cast<void*>(stream));
}

}  // namespace loom::api
