#include "base/error.hpp"

#include <cstring>

namespace loom {

Error::Error(loomResult_t code, std::string message)
    : std::runtime_error(std::move(message)), code_(code) {}

void throwSystemError(const std::string& what, int errnum) {
  throw Error(loomSystemError, what + ": " + std::strerror(errnum));
}

const char* resultName(loomResult_t result) noexcept {
  switch (result) {
    case loomSuccess: return "no error";
    case loomUnhandledCudaError: return "unhandled cuda error";
    case loomSystemError: return "unhandled system error";
    case loomInternalError: return "internal error";
    case loomInvalidArgument: return "invalid argument";
    case loomInvalidUsage: return "invalid usage";
    case loomRemoteError: return "remote process exited or there was a network error";
    case loomInProgress: return "operation in progress";
    case loomTimeout: return "operation timed out";
    case loomNumResults: break;
  }
  return "unknown result code";
}

}  // namespace loom
