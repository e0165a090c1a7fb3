#include "training/layers/gelu.hpp"

#include <cmath>

namespace loom::train {
namespace {

constexpr float kScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;

}  // namespace

void Gelu::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  x_ = x;
  for (size_t i = 0; i < rows * features_; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kScale * (v + kCubic * v * v * v)));
  }
}

void Gelu::backward(std::span<const float> dy, std::span<float> dx, size_t rows) {
  if (dx.empty()) return;
  for (size_t i = 0; i < rows * features_; ++i) {
    const float v = x_[i];
    const float t = std::tanh(kScale * (v + kCubic * v * v * v));
    const float sech2 = 1.0f - t * t;
    const float local = 0.5f * (1.0f + t) + 0.5f * v * sech2 * kScale * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = local * dy[i];
  }
}

}  // namespace loom::train
