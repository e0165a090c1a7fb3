// Sizes of the loomDataType_t values, and the byte count of a buffer argument.
#pragma once

#include <loom/loom.h>

#include <cstddef>

namespace loom {

// Throws loomInvalidArgument naming "datatype" for a value that is not a loomDataType_t.
size_t datatypeSize(loomDataType_t datatype);
// "int8", "float32", "bfloat16", ...; "?" for a value that is not one.
const char* datatypeName(loomDataType_t datatype);
// count x datatypeSize, or loomInvalidArgument naming "count" if that overflows.
size_t bufferBytes(size_t count, loomDataType_t datatype);

}  // namespace loom
