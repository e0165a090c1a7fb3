// loomMemAlloc / loomMemAllocDevice / loomMemFree: host buffers that the
// ranks of a node read in place, and device buffers Loom allocates.
#include <loom/loom.h>

#include "api/api_call.hpp"
#include "memory/device_buffers.hpp"
#include "memory/shared_buffers.hpp"

using loom::api::call;
using loom::api::requireNonNull;

extern "C" {

loomResult_t loomMemAlloc(void** ptr, size_t size) {
  return call(__func__, nullptr, [&] {
    requireNonNull(ptr, "ptr");
    *ptr = nullptr;
    *ptr = loom::memory::allocateShared(size);
  });
}

loomResult_t loomMemAllocDevice(void** ptr, size_t size) {
  return call(__func__, nullptr, [&] {
    requireNonNull(ptr, "ptr");
    *ptr = nullptr;
    *ptr = loom::memory::allocateDevice(size);
  });
}

loomResult_t loomMemFree(void* ptr) {
  return call(__func__, nullptr, [&] {
    requireNonNull(ptr, "ptr");
    if (!loom::memory::freeDevice(ptr)) loom::memory::freeShared(ptr);
  });
}

}  // extern "C"
