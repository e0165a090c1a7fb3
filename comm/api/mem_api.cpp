// loomMemAlloc / loomMemFree: host buffers that the ranks of a node read in place.
#include <loom/loom.h>

#include "comm/api/api_call.hpp"
#include "transport/shm/shared_buffers.hpp"

using loom::api::call;
using loom::api::requireNonNull;

extern "C" {

loomResult_t loomMemAlloc(void** ptr, size_t size) {
  return call(__func__, nullptr, [&] {
    requireNonNull(ptr, "ptr");
    *ptr = nullptr;
    *ptr = loom::transport::shm::allocateShared(size);
  });
}

loomResult_t loomMemFree(void* ptr) {
  return call(__func__, nullptr, [&] {
    requireNonNull(ptr, "ptr");
    loom::transport::shm::freeShared(ptr);
  });
}

}  // extern "C"
