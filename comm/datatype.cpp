#include "comm/datatype.hpp"

#include <cstdint>
#include <string>

#include "comm/base/error.hpp"

namespace loom {

size_t datatypeSize(loomDataType_t datatype) {
  switch (datatype) {
    case loomInt8:
    case loomUint8: return 1;
    case loomFloat16:
    case loomBfloat16: return 2;
    case loomInt32:
    case loomUint32:
    case loomFloat32: return 4;
    case loomInt64:
    case loomUint64:
    case loomFloat64: return 8;
    case loomNumTypes:
    case loomMaxDataType: break;
  }
  throw Error(loomInvalidArgument, "datatype=" + std::to_string(static_cast<int>(datatype)) + " is not a loomDataType_t");
}

const char* datatypeName(loomDataType_t datatype) {
  switch (datatype) {
    case loomInt8: return "int8";
    case loomUint8: return "uint8";
    case loomInt32: return "int32";
    case loomUint32: return "uint32";
    case loomInt64: return "int64";
    case loomUint64: return "uint64";
    case loomFloat16: return "float16";
    case loomBfloat16: return "bfloat16";
    case loomFloat32: return "float32";
    case loomFloat64: return "float64";
    case loomNumTypes:
    case loomMaxDataType: break;
  }
  return "?";
}

size_t bufferBytes(size_t count, loomDataType_t datatype) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, datatypeSize(datatype), &bytes)) {
    throw Error(loomInvalidArgument, "count=" + std::to_string(count) + " overflows the buffer size");
  }
  return bytes;
}

}  // namespace loom
