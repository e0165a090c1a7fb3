// Sizes of the loomDataType_t values, and the byte count of a buffer argument.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <cstdint>

namespace loom {

// datatypeSize's error, built out of line.
[[noreturn]] void throwNotADatatype(loomDataType_t datatype);
// Throws loomInvalidArgument naming "datatype" for a value that is not a
// loomDataType_t. Inline, as every call asks it several times.
inline size_t datatypeSize(loomDataType_t datatype) {
  // By value, in loom.h's order (NCCL's): int8, uint8, int32, uint32, int64,
  // uint64, float16, float32, float64, bfloat16.
  constexpr uint8_t kSizes[loomNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  const auto index = static_cast<uint32_t>(datatype);  // a negative value wraps past the table
  if (index < loomNumTypes) return kSizes[index];
  throwNotADatatype(datatype);
}
// bufferBytes' and requireInAddressSpace's errors.
[[noreturn]] void throwBufferTooLarge(size_t count, loomDataType_t datatype, const char* countName, size_t blocks);
[[noreturn]] void throwPastAddressSpace(size_t bytes, const char* name);
// "int8", "float32", "bfloat16", ...; "?" for a value that is not one.
const char* datatypeName(loomDataType_t datatype);
// Whether an average of `datatype` scales the sum by 1/n (the floating types
// with reductions: float16, bfloat16, float32, float64) rather than
// dividing it (the integers).
bool isFloatType(loomDataType_t datatype);
// The bytes of a buffer argument that holds `blocks` blocks of `count`
// elements (blocks > 1: the n-block buffers of all-gather, reduce-scatter,
// gather, scatter and all-to-all). loomInvalidArgument naming `countName`
// unless they are at most LOOM_MAX_BUFFER_BYTES: the one size rule of every
// entry point, which also keeps every offset the algorithms compute from
// wrapping.
// Inline, as every call asks; the messages are built out of line.
inline size_t bufferBytes(size_t count, loomDataType_t datatype, const char* countName = "count",
                          size_t blocks = 1) {
  const size_t size = datatypeSize(datatype);
  size_t elements = 0;
  size_t bytes = 0;
  if (!__builtin_mul_overflow(count, blocks, &elements) && !__builtin_mul_overflow(elements, size, &bytes) &&
      bytes <= LOOM_MAX_BUFFER_BYTES) {
    return bytes;
  }
  throwBufferTooLarge(count, datatype, countName, blocks);
}
// loomInvalidArgument naming `name` when [p, p + bytes) runs past the end of
// the address space.
inline void requireInAddressSpace(const void* p, size_t bytes, const char* name) {
  if (bytes != 0 && reinterpret_cast<uintptr_t>(p) > UINTPTR_MAX - (bytes - 1)) throwPastAddressSpace(bytes, name);
}

}  // namespace loom
