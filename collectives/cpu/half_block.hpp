// Blocks of float16 to float32 and back (round to nearest even), with the
// CPU's F16C conversions where it has them (every x86 CPU with AVX2 does) and
// half.hpp's otherwise. The compiler cannot vectorize half.hpp's selects well,
// so the float16 kernels convert a block at a time through these.
#pragma once

#include <cstddef>

namespace loom::cpu {

// `src`/`dst` of float16 may have any alignment.
void halfToFloatBlock(const std::byte* src, float* dst, size_t n);
void floatToHalfBlock(const float* src, std::byte* dst, size_t n);

}  // namespace loom::cpu
