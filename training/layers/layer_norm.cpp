#include "training/layers/layer_norm.hpp"

#include <algorithm>
#include <cmath>

#include "training/math/vector_loops.hpp"

namespace loom::train {

namespace {

// y = (x - mean) / sqrt(var + eps) * w + b per row, keeping each row's mean and 1 / sqrt(var + eps).
LOOM_VECTOR_LOOPS void layerNormForward(const float* x, const float* params, float* y, float* means, float* rstds,
                                 size_t rows, size_t features) {
  const float* w = params;
  const float* b = params + features;
  const auto n = static_cast<float>(features);
  for (size_t r = 0; r < rows; ++r) {
    const float* in = x + r * features;
    float mean = 0;
    for (size_t i = 0; i < features; ++i) mean += in[i];
    mean /= n;
    float var = 0;
    for (size_t i = 0; i < features; ++i) var += (in[i] - mean) * (in[i] - mean);
    var /= n;
    const float rstd = 1.0f / std::sqrt(var + 1e-5f);
    float* out = y + r * features;
    for (size_t i = 0; i < features; ++i) out[i] = (in[i] - mean) * rstd * w[i] + b[i];
    means[r] = mean;
    rstds[r] = rstd;
  }
}

// dL/dx of every row.
LOOM_VECTOR_LOOPS void layerNormInputGradient(const float* x, const float* w, const float* dy, const float* means,
                                     const float* rstds, float* dx, size_t rows, size_t features) {
  const auto n = static_cast<float>(features);
  for (size_t r = 0; r < rows; ++r) {
    const float* in = x + r * features;
    const float* d = dy + r * features;
    const float mean = means[r];
    const float rstd = rstds[r];
    float dnormMean = 0;
    float dnormNormMean = 0;
    for (size_t i = 0; i < features; ++i) {
      const float norm = (in[i] - mean) * rstd;
      const float dnorm = w[i] * d[i];
      dnormMean += dnorm;
      dnormNormMean += dnorm * norm;
    }
    dnormMean /= n;
    dnormNormMean /= n;
    for (size_t i = 0; i < features; ++i) {
      const float norm = (in[i] - mean) * rstd;
      dx[r * features + i] = (w[i] * d[i] - dnormMean - norm * dnormNormMean) * rstd;
    }
  }
}

// dL/dw and dL/db, summed over the rows in order.
LOOM_VECTOR_LOOPS void layerNormWeightGradient(const float* x, const float* dy, const float* means, const float* rstds,
                                      float* grads, size_t rows, size_t features) {
  float* dw = grads;
  float* db = grads + features;
  std::fill(grads, grads + 2 * features, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    const float* in = x + r * features;
    const float* d = dy + r * features;
    for (size_t i = 0; i < features; ++i) {
      const float norm = (in[i] - means[r]) * rstds[r];
      dw[i] += d[i] * norm;
      db[i] += d[i];
    }
  }
}

}  // namespace

void LayerNorm::init(Random& /*random*/) {
  std::fill(params_.begin(), params_.begin() + static_cast<std::ptrdiff_t>(features_), 1.0f);
  std::fill(params_.begin() + static_cast<std::ptrdiff_t>(features_), params_.end(), 0.0f);
}

void LayerNorm::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  x_ = x;
  mean_.resize(rows);
  rstd_.resize(rows);
  layerNormForward(x.data(), params_.data(), y.data(), mean_.data(), rstd_.data(), rows, features_);
}

void LayerNorm::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) {
  dy_ = dy;
  rows_ = rows;
  if (dx.empty()) return;
  layerNormInputGradient(x_.data(), params_.data(), dy.data(), mean_.data(), rstd_.data(), dx.data(), rows, features_);
}

void LayerNorm::backwardWeights() {
  layerNormWeightGradient(x_.data(), dy_.data(), mean_.data(), rstd_.data(), grads_.data(), rows_, features_);
  rowsSplitOver_.allReduce(grads_);
}

}  // namespace loom::train
