#include "training/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace loom::train {
namespace {

class AdamW final : public Optimizer {
 public:
  AdamW(MemoryAccount& account, size_t count, AdamWSettings settings)
      : settings_(settings), state_(account, Category::OptimizerState, 2 * count), count_(count) {}

  // torch 1.13's single-tensor AdamW, in its order of operations: the
  // bias corrections in double, folded into the step size and the
  // denominator; the rest in float.
  void step(std::span<float> params, std::span<const float> grads, float lr) override {
    ++t_;
    const AdamWSettings& s = settings_;
    const auto t = static_cast<double>(t_);
    const double correct1 = 1.0 - std::pow(static_cast<double>(s.beta1), t);
    const double correct2Root = std::sqrt(1.0 - std::pow(static_cast<double>(s.beta2), t));
    const auto stepSize = static_cast<float>(static_cast<double>(lr) / correct1);
    const auto rootScale = static_cast<float>(correct2Root);
    const float decay = 1.0f - lr * s.weightDecay;
    float* m = state_.data();
    float* v = state_.data() + count_;
    for (size_t i = 0; i < params.size(); ++i) {
      const float g = grads[i];
      params[i] *= decay;
      m[i] = m[i] * s.beta1 + g * (1.0f - s.beta1);
      v[i] = v[i] * s.beta2 + (1.0f - s.beta2) * (g * g);
      const float denom = std::sqrt(v[i]) / rootScale + s.eps;
      params[i] -= stepSize * (m[i] / denom);
    }
  }
  std::span<float> state() override { return state_.span(); }
  uint64_t steps() const override { return t_; }
  void setSteps(uint64_t steps) override { t_ = steps; }

 private:
  AdamWSettings settings_;
  Tracked<float> state_;  // m, then v
  size_t count_;
  uint64_t t_ = 0;
};

class Sgd final : public Optimizer {
 public:
  Sgd(MemoryAccount& account, size_t count, SgdSettings settings)
      : settings_(settings), velocity_(account, Category::OptimizerState, count) {}

  void step(std::span<float> params, std::span<const float> grads, float lr) override {
    const bool first = t_++ == 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const float g = grads[i] + settings_.weightDecay * params[i];
      velocity_[i] = first ? g : settings_.momentum * velocity_[i] + g;
      params[i] -= lr * velocity_[i];
    }
  }
  std::span<float> state() override { return velocity_.span(); }
  uint64_t steps() const override { return t_; }
  void setSteps(uint64_t steps) override { t_ = steps; }

 private:
  SgdSettings settings_;
  Tracked<float> velocity_;
  uint64_t t_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> makeAdamW(MemoryAccount& account, size_t count, AdamWSettings settings) {
  return std::make_unique<AdamW>(account, count, settings);
}

std::unique_ptr<Optimizer> makeSgd(MemoryAccount& account, size_t count, SgdSettings settings) {
  return std::make_unique<Sgd>(account, count, settings);
}

float learningRate(uint64_t step, uint64_t warmup, uint64_t total, float base, float min) {
  if (step < warmup) return base * static_cast<float>(step + 1) / static_cast<float>(warmup);
  if (total <= warmup) return base;
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  return min + static_cast<float>(0.5 * (1.0 + std::cos(std::numbers::pi * progress))) * (base - min);
}

double sumOfSquares(std::span<const float> values) {
  double sum = 0;
  for (float v : values) sum += static_cast<double>(v) * static_cast<double>(v);
  return sum;
}

double clipToNorm(std::span<float> grads, double sumSquares, double maxNorm) {
  const double norm = std::sqrt(sumSquares);
  if (maxNorm > 0 && norm > maxNorm) {
    const auto scale = static_cast<float>(maxNorm / (norm + 1e-6));
    for (float& g : grads) g *= scale;
  }
  return norm;
}

}  // namespace loom::train
