#include "training/layers/linear.hpp"

#include <cmath>

#include "training/math/bias.hpp"
#include "training/math/gemm.hpp"

namespace loom::train {

std::vector<ParamSpec> Linear::params() const {
  std::vector<ParamSpec> p{{"weight", in_ * out_}};
  if (bias_) p.push_back({"bias", out_});
  return p;
}

void Linear::init(Random& random) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  for (float& w : params_) w = random.uniform(bound);
}

void Linear::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  x_ = x;
  gemm(Transpose::No, Transpose::Yes, rows, out_, in_, x.data(), params_.data(), y.data());
  if (bias_) addBias(y, params_.data() + in_ * out_, rows, out_);
}

void Linear::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) {
  dy_ = dy;
  rows_ = rows;
  // dx (rows x in) = dy (rows x out) x W (out x in)
  if (!dx.empty()) gemm(Transpose::No, Transpose::No, rows, in_, out_, dy.data(), params_.data(), dx.data());
}

void Linear::backwardWeights() {
  // dW (out x in) = dy^T (out x rows) x (rows x in)
  gemm(Transpose::Yes, Transpose::No, out_, in_, rows_, dy_.data(), x_.data(), grads_.data());
  if (bias_) biasGradient(dy_, grads_.data() + in_ * out_, rows_, out_);
}

}  // namespace loom::train
