// The reduction kernels: dst = op(src[0], ..., src[n-1]) element-wise, reading
// every source once (one pass, whatever n is). float16 and bfloat16 accumulate
// in float32 across all sources and round once, to nearest even. Integers wrap
// (two's complement) instead of overflowing. min and max propagate NaN.
// PreMulSum multiplies each source by a scalar as it is loaded (NCCL's
// semantics), which is how float averages are taken.
//
// Each (type, op) loop is compiled for AVX-512, AVX2 and plain x86-64 and the
// best is picked at load time (GCC function multiversioning); elsewhere it is
// plain code the compiler vectorizes for the target.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <span>

namespace loom::cpu {

enum class ReduceOp { Sum, Prod, Min, Max, PreMulSum };

// dst may be one of the sources (in place). Sources must not overlap dst otherwise.
// `scalar` is PreMulSum's factor (ignored by the others).
void reduce(loomDataType_t type, ReduceOp op, std::span<const void* const> sources, void* dst, size_t count,
            double scalar = 1.0);

// dst[i] /= divisor: integer averages (sum, then divide, truncating toward zero).
void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor);

}  // namespace loom::cpu
