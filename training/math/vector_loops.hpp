// The element-wise loops of the layers and the optimizers (GELU, layer
// norm, softmax, residuals, biases, AdamW, bf16's conversions) are much of a
// small model's step, and GCC vectorizes them. x86-64's baseline is SSE2,
// four floats a vector; LOOM_VECTOR_LOOPS builds such a function for AVX2
// too, eight, and the loader picks the one the CPU runs (target_clones, an
// ifunc), as collectives/cpu/reduce.cpp's LOOM_MULTIVERSION does for the
// host's reductions (a layer this one does not include). Both do the same
// arithmetic on each element in the same order, so the bits do not depend
// on the CPU: AVX2 alone adds no fused multiply-add for the compiler to
// contract a * b + c into (AVX-512 would, which a reduction's lone add does
// not mind and these loops would), and nothing is reassociated (no
// -ffast-math). Virtual functions cannot be cloned, so the loops live in
// free functions the layers call. The sanitizers' builds keep one version:
// their runtimes start after the loader has run the ifuncs' resolvers.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LOOM_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LOOM_SANITIZED 1
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(LOOM_SANITIZED)
#define LOOM_VECTOR_LOOPS [[gnu::target_clones("avx2", "default")]]
#else
#define LOOM_VECTOR_LOOPS
#endif
