// GELU, the tanh approximation GPT-2 uses (torch's approximate="tanh"):
// y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once

#include "training/layers/layer.hpp"
#include "training/memory.hpp"

namespace loom::train {

class Gelu final : public Layer {
 public:
  Gelu(size_t features, MemoryAccount& account) : features_(features), tanh_(account, Category::Activations) {}
  std::string name() const override { return "gelu"; }
  size_t inFeatures() const override { return features_; }
  size_t outFeatures() const override { return features_; }
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  void backward(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void releaseActivations() override { tanh_.release(); }

 private:
  size_t features_;
  std::span<const float> x_;
  Tracked<float> tanh_;  // forward's tanh, which backward needs again
};

}  // namespace loom::train
