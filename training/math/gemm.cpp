#include "training/math/gemm.hpp"

#include <cblas.h>

namespace loom::train {

void gemm(Transpose ta, Transpose tb, size_t m, size_t n, size_t k, const float* a, const float* b, float* c) {
  gemm(ta, tb, m, n, k, a, b, c, {ta == Transpose::No ? k : m, tb == Transpose::No ? n : k, n});
}

void gemm(Transpose ta, Transpose tb, size_t m, size_t n, size_t k, const float* a, const float* b, float* c,
          Strides s) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, ta == Transpose::No ? CblasNoTrans : CblasTrans,
              tb == Transpose::No ? CblasNoTrans : CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(s.lda), b, static_cast<blasint>(s.ldb), 0.0f,
              c, static_cast<blasint>(s.ldc));
}

void gemmReference(Transpose ta, Transpose tb, size_t m, size_t n, size_t k, const float* a, const float* b,
                   float* c) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double sum = 0;
      for (size_t p = 0; p < k; ++p) {
        const float x = ta == Transpose::No ? a[i * k + p] : a[p * m + i];
        const float y = tb == Transpose::No ? b[p * n + j] : b[j * k + p];
        sum += static_cast<double>(x) * static_cast<double>(y);
      }
      c[i * n + j] = static_cast<float>(sum);
    }
  }
}

void setBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace loom::train
