#include "training/layers/layer_norm.hpp"

#include <algorithm>
#include <cmath>

namespace loom::train {

void LayerNorm::init(Random& /*random*/) {
  std::fill(params_.begin(), params_.begin() + static_cast<std::ptrdiff_t>(features_), 1.0f);
  std::fill(params_.begin() + static_cast<std::ptrdiff_t>(features_), params_.end(), 0.0f);
}

void LayerNorm::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  x_ = x;
  mean_.resize(rows);
  rstd_.resize(rows);
  const float* w = params_.data();
  const float* b = params_.data() + features_;
  const auto n = static_cast<float>(features_);
  for (size_t r = 0; r < rows; ++r) {
    const float* in = x.data() + r * features_;
    float mean = 0;
    for (size_t i = 0; i < features_; ++i) mean += in[i];
    mean /= n;
    float var = 0;
    for (size_t i = 0; i < features_; ++i) var += (in[i] - mean) * (in[i] - mean);
    var /= n;
    const float rstd = 1.0f / std::sqrt(var + 1e-5f);
    float* out = y.data() + r * features_;
    for (size_t i = 0; i < features_; ++i) out[i] = (in[i] - mean) * rstd * w[i] + b[i];
    mean_[r] = mean;
    rstd_[r] = rstd;
  }
}

void LayerNorm::backward(std::span<const float> dy, std::span<float> dx, size_t rows) {
  backwardInput(dy, dx, rows);
  backwardWeights();
}

void LayerNorm::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) {
  dy_ = dy;
  rows_ = rows;
  if (dx.empty()) return;
  const float* w = params_.data();
  const auto n = static_cast<float>(features_);
  for (size_t r = 0; r < rows; ++r) {
    const float* in = x_.data() + r * features_;
    const float* d = dy.data() + r * features_;
    const float mean = mean_[r];
    const float rstd = rstd_[r];
    float dnormMean = 0;
    float dnormNormMean = 0;
    for (size_t i = 0; i < features_; ++i) {
      const float norm = (in[i] - mean) * rstd;
      const float dnorm = w[i] * d[i];
      dnormMean += dnorm;
      dnormNormMean += dnorm * norm;
    }
    dnormMean /= n;
    dnormNormMean /= n;
    for (size_t i = 0; i < features_; ++i) {
      const float norm = (in[i] - mean) * rstd;
      dx[r * features_ + i] = (w[i] * d[i] - dnormMean - norm * dnormNormMean) * rstd;
    }
  }
}

void LayerNorm::backwardWeights() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  float* dw = grads_.data();
  float* db = grads_.data() + features_;
  for (size_t r = 0; r < rows_; ++r) {
    const float* in = x_.data() + r * features_;
    const float* d = dy_.data() + r * features_;
    for (size_t i = 0; i < features_; ++i) {
      const float norm = (in[i] - mean_[r]) * rstd_[r];
      dw[i] += d[i] * norm;
      db[i] += d[i];
    }
  }
  rowsSplitOver_.allReduce(grads_);
}

}  // namespace loom::train
