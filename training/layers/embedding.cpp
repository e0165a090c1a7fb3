#include "training/layers/embedding.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace loom::train {

std::vector<ParamSpec> Embedding::params() const {
  return {{"wte", vocab_ * channels_}, {"wpe", context_ * channels_}};
}

void Embedding::init(Random& random) {
  for (float& w : params_) w = random.normal(0.02f);
}

void Embedding::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  x_ = x;
  const float* wte = params_.data();
  const float* wpe = params_.data() + vocab_ * channels_;
  for (size_t r = 0; r < rows; ++r) {
    const auto token = static_cast<size_t>(x[r]);
    if (x[r] < 0 || token >= vocab_ || static_cast<float>(token) != x[r]) {
      throw std::invalid_argument("row " + std::to_string(r) + " holds token " + std::to_string(x[r]) +
                                  ", not one of " + std::to_string(vocab_));
    }
    const float* e = wte + token * channels_;
    const float* p = wpe + (r % context_) * channels_;
    float* out = y.data() + r * channels_;
    for (size_t c = 0; c < channels_; ++c) out[c] = e[c] + p[c];
  }
}

void Embedding::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) {
  dy_ = dy;
  rows_ = rows;
  std::fill(dx.begin(), dx.end(), 0.0f);
}

void Embedding::backwardWeights() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  float* dwte = grads_.data();
  float* dwpe = grads_.data() + vocab_ * channels_;
  for (size_t r = 0; r < rows_; ++r) {  // rows in order: the same sums on every rank and in every mode
    float* e = dwte + static_cast<size_t>(x_[r]) * channels_;
    float* p = dwpe + (r % context_) * channels_;
    const float* d = dy_.data() + r * channels_;
    for (size_t c = 0; c < channels_; ++c) {
      e[c] += d[c];
      p[c] += d[c];
    }
  }
}

}  // namespace loom::train
