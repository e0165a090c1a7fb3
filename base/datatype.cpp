#include "base/datatype.hpp"

#include <cstdint>
#include <string>

#include "base/error.hpp"

namespace loom {

void throwNotADatatype(loomDataType_t datatype) {
  throw Error(loomInvalidArgument, "datatype=" + std::to_string(static_cast<int>(datatype)) + " is not a loomDataType_t");
}

bool isFloatType(loomDataType_t datatype) {
  return datatype == loomFloat16 || datatype == loomBfloat16 || datatype == loomFloat32 || datatype == loomFloat64;
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
    case loomMinDataType:
    case loomMaxDataType: break;
  }
  return "?";
}

void throwBufferTooLarge(size_t count, loomDataType_t datatype, const char* countName, size_t blocks) {
  const size_t size = datatypeSize(datatype);
  size_t elements = 0;
  size_t bytes = 0;
  const bool overflows =
      __builtin_mul_overflow(count, blocks, &elements) || __builtin_mul_overflow(elements, size, &bytes);
  std::string what = std::string(countName) + "=" + std::to_string(count);
  if (blocks > 1) what += " x " + std::to_string(blocks) + " ranks";
  what += " x " + std::to_string(size) + "-byte " + datatypeName(datatype);
  // A count just below 2^64 is almost always a negative int passed as size_t.
  const bool negative = count > (SIZE_MAX >> 1);
  throw Error(loomInvalidArgument, what + (overflows ? " overflows size_t" : " is " + std::to_string(bytes) + " bytes") +
                                       ", more than one buffer may hold (LOOM_MAX_BUFFER_BYTES = 2^47)" +
                                       (negative ? "; a negative count passed as size_t?" : ""));
}

void throwPastAddressSpace(size_t bytes, const char* name) {
  throw Error(loomInvalidArgument,
              std::string(name) + " + " + std::to_string(bytes) + " bytes runs past the end of the address space");
}

}  // namespace loom
