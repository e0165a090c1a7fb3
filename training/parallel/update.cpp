#include "training/parallel/update.hpp"

#include <algorithm>

namespace loom::train {
namespace {

std::unique_ptr<Optimizer> makeOptimizer(MemoryAccount& account, size_t count, const TrainConfig& config) {
  return config.optimizer == OptimizerKind::AdamW ? makeAdamW(account, count, config.adamw)
                                                  : makeSgd(account, count, config.sgd);
}

// The mean and the clip as the fp32 path applies them, one float rounding each.
inline float scaled(float g, float mean, float clip) {
  g *= mean;
  if (clip != 1.0f) g *= clip;
  return g;
}

constexpr size_t kBlock = 16384;  // widened gradients at a time: 64 KiB

}  // namespace

std::vector<std::span<float>> withOptimizer(Optimizer& optimizer, std::span<float> values) {
  std::vector<std::span<float>> out{values};
  const std::span<float> state = optimizer.state();
  for (size_t c = 0; c < optimizer.components(); ++c) out.push_back(state.subspan(c * values.size(), values.size()));
  return out;
}

Update<float>::Update(MemoryAccount& account, size_t count, const TrainConfig& config)
    : optimizer_(makeOptimizer(account, count, config)) {}

double Update<float>::sumOfSquares(std::span<const float> grads, float mean, double from) const {
  double sum = from;
  for (float g : grads) {
    const float s = g * mean;
    sum += static_cast<double>(s) * static_cast<double>(s);
  }
  return sum;
}

void Update<float>::step(std::span<float> params, std::span<float> grads, float mean, float clip, float lr) {
  for (float& g : grads) g = scaled(g, mean, clip);
  optimizer_->step(params, grads, lr);
}

Update<bf16>::Update(MemoryAccount& account, size_t count, const TrainConfig& config)
    : optimizer_(makeOptimizer(account, count, config)),
      master_(account, Category::OptimizerState, count),
      block_(account, Category::Activations, kBlock) {}

void Update<bf16>::load(std::span<const bf16> params) { widen(params, master_.span()); }

double Update<bf16>::sumOfSquares(std::span<const bf16> grads, float mean, double from) const {
  double sum = from;
  for (bf16 g : grads) {
    const float s = widen(g) * mean;
    sum += static_cast<double>(s) * static_cast<double>(s);
  }
  return sum;
}

void Update<bf16>::step(std::span<bf16> params, std::span<bf16> grads, float mean, float clip, float lr) {
  optimizer_->begin();
  for (size_t at = 0; at < grads.size(); at += kBlock) {
    const size_t n = std::min(kBlock, grads.size() - at);
    for (size_t i = 0; i < n; ++i) block_[i] = scaled(widen(grads[at + i]), mean, clip);
    optimizer_->update(master_.span().subspan(at, n), block_.span().first(n), lr, at);
  }
  narrow(master_.span(), params);
}

void Update<bf16>::restored(std::span<bf16> params) { narrow(master_.span(), params); }

}  // namespace loom::train
