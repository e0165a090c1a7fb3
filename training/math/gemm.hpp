// Matrix products on row-major float32 matrices, through OpenBLAS's
// cblas_sgemm; gemmReference is the naive triple loop the tests hold it to.
#pragma once

#include <cstddef>

namespace loom::train {

enum class Transpose { No, Yes };

// C (m x n) = op(A) (m x k) * op(B) (k x n), where op(A) is A or A transposed
// as stored (A is m x k, or k x m when transposed); C is overwritten.
void gemm(Transpose ta, Transpose tb, size_t m, size_t n, size_t k, const float* a, const float* b, float* c);
// The same on matrices inside larger ones: row i of A starts lda floats
// after row i - 1 (of op(A) as stored), and so on for B and C.
struct Strides {
  size_t lda;
  size_t ldb;
  size_t ldc;
};
void gemm(Transpose ta, Transpose tb, size_t m, size_t n, size_t k, const float* a, const float* b, float* c,
          Strides strides);
void gemmReference(Transpose ta, Transpose tb, size_t m, size_t n, size_t k, const float* a, const float* b,
                   float* c);

// How many threads OpenBLAS may use (1 when ranks share the cores).
void setBlasThreads(int threads);

}  // namespace loom::train
