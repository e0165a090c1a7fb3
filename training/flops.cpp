#include "training/flops.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "training/math/gemm.hpp"

namespace loom::train {

double flopsPerSample(const Model& model, const GptShape* gpt) {
  const auto params = static_cast<double>(model.paramCount());
  if (gpt == nullptr) return 6 * params;
  const auto embedding = static_cast<double>((gpt->vocab + gpt->context) * gpt->dim);
  const auto t = static_cast<double>(gpt->context);
  const double attention = 12 * static_cast<double>(gpt->layers) * static_cast<double>(gpt->dim) * t;
  return t * (6 * (params - embedding) + attention);
}

double measurePeakFlops(double seconds) {
  using Clock = std::chrono::steady_clock;
  constexpr size_t n = 256;  // large enough for the kernel's full rate, small enough to repeat
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 0;
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto from = Clock::now();
    gemm(Transpose::No, Transpose::No, n, n, n, a.data(), b.data(), c.data());
    const double took = std::chrono::duration<double>(Clock::now() - from).count();
    if (took > 0) best = std::max(best, 2.0 * n * n * n / took);
  } while (Clock::now() < until);
  return best;
}

}  // namespace loom::train
