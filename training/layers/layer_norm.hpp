// Layer normalization over each row's features (torch.nn.LayerNorm, eps
// 1e-5): y = (x - mean) / sqrt(var + eps) * weight + bias, with weight
// starting at 1 and bias at 0. Under sequence parallelism each tensor rank
// normalizes its share of the rows, so its gradients are a partial sum:
// given that tensor group, backward all-reduces them (Megatron's
// layer-norm gradient all-reduce).
#pragma once

#include "training/layers/layer.hpp"
#include "training/layers/tensor_group.hpp"
#include "training/memory.hpp"

namespace loom::train {

class LayerNorm final : public SplitLayer {
 public:
  LayerNorm(size_t features, MemoryAccount& account, const TensorGroup* rowsSplitOver = nullptr)
      : features_(features), mean_(account, Category::Activations), rstd_(account, Category::Activations),
        rowsSplitOver_(rowsSplitOver != nullptr && rowsSplitOver->sequence ? *rowsSplitOver : TensorGroup{}) {}
  std::string name() const override { return "layernorm"; }
  size_t inFeatures() const override { return features_; }
  size_t outFeatures() const override { return features_; }
  std::vector<ParamSpec> params() const override { return {{"weight", features_}, {"bias", features_}}; }
  void init(Random& random) override;
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void backwardWeights() override;
  void releaseActivations() override {
    mean_.release();
    rstd_.release();
  }

 private:
  size_t features_;
  std::span<const float> x_;
  std::span<const float> dy_;  // the last backwardInput's
  size_t rows_ = 0;
  Tracked<float> mean_;  // per row, for backward
  Tracked<float> rstd_;
  TensorGroup rowsSplitOver_;  // size 1 unless sequence parallel
};

}  // namespace loom::train
