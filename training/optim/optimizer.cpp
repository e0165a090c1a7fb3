#include "training/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "training/math/vector_loops.hpp"

namespace loom::train {
namespace {

// AdamW's update of n parameters from their moments m and v.
LOOM_VECTOR_LOOPS void adamw(float* params, const float* grads, float* m, float* v, size_t n, const AdamWSettings& s,
                             float stepSize, float decay, float rootScale) {
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    params[i] *= decay;
    m[i] = m[i] * s.beta1 + g * (1.0f - s.beta1);
    v[i] = v[i] * s.beta2 + (1.0f - s.beta2) * (g * g);
    const float denom = std::sqrt(v[i]) / rootScale + s.eps;
    params[i] -= stepSize * (m[i] / denom);
  }
}

class AdamW final : public Optimizer {
 public:
  AdamW(MemoryAccount& account, size_t count, AdamWSettings settings)
      : settings_(settings), state_(account, Category::OptimizerState, 2 * count), count_(count) {}

  // torch 1.13's single-tensor AdamW, in its order of operations: the
  // bias corrections in double, folded into the step size and the
  // denominator; the rest in float.
  void begin() override {
    ++t_;
    const auto t = static_cast<double>(t_);
    correct1_ = 1.0 - std::pow(static_cast<double>(settings_.beta1), t);
    rootScale_ = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(settings_.beta2), t)));
  }
  void update(std::span<float> params, std::span<const float> grads, float lr, size_t at) override {
    const AdamWSettings& s = settings_;
    const auto stepSize = static_cast<float>(static_cast<double>(lr) / correct1_);
    const float decay = 1.0f - lr * s.weightDecay;
    adamw(params.data(), grads.data(), state_.data() + at, state_.data() + count_ + at, params.size(), s, stepSize,
          decay, rootScale_);
  }
  std::span<float> state() override { return state_.span(); }
  size_t components() const override { return 2; }
  uint64_t steps() const override { return t_; }
  void setSteps(uint64_t steps) override { t_ = steps; }

 private:
  AdamWSettings settings_;
  Tracked<float> state_;  // m, then v
  size_t count_;
  uint64_t t_ = 0;
  double correct1_ = 1.0;  // this step's bias corrections (begin())
  float rootScale_ = 1.0f;
};

class Sgd final : public Optimizer {
 public:
  Sgd(MemoryAccount& account, size_t count, SgdSettings settings)
      : settings_(settings), velocity_(account, Category::OptimizerState, count) {}

  void begin() override { first_ = t_++ == 0; }
  void update(std::span<float> params, std::span<const float> grads, float lr, size_t at) override {
    float* velocity = velocity_.data() + at;
    for (size_t i = 0; i < params.size(); ++i) {
      const float g = grads[i] + settings_.weightDecay * params[i];
      velocity[i] = first_ ? g : settings_.momentum * velocity[i] + g;
      params[i] -= lr * velocity[i];
    }
  }
  std::span<float> state() override { return velocity_.span(); }
  size_t components() const override { return 1; }
  uint64_t steps() const override { return t_; }
  void setSteps(uint64_t steps) override { t_ = steps; }

 private:
  SgdSettings settings_;
  Tracked<float> velocity_;
  uint64_t t_ = 0;
  bool first_ = false;  // this step is the first (begin())
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

float clipScale(double sumSquares, double maxNorm) {
  const double norm = std::sqrt(sumSquares);
  return maxNorm > 0 && norm > maxNorm ? static_cast<float>(maxNorm / (norm + 1e-6)) : 1.0f;
}

double clipToNorm(std::span<float> grads, double sumSquares, double maxNorm) {
  const float scale = clipScale(sumSquares, maxNorm);
  if (scale != 1.0f) {
    for (float& g : grads) g *= scale;
  }
  return std::sqrt(sumSquares);
}

}  // namespace loom::train
