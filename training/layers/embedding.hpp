// Token and position embeddings (GPT-2's wte and wpe): row r holds one
// token id (as a float, exact below 2^24) at position r mod context, and
// becomes wte[token] + wpe[position]. Both tables start normal(0, 0.02).
#pragma once

#include "training/layers/layer.hpp"

namespace loom::train {

class Embedding final : public SplitLayer {
 public:
  Embedding(size_t vocab, size_t context, size_t channels) : vocab_(vocab), context_(context), channels_(channels) {}
  std::string name() const override { return "embedding"; }
  size_t inFeatures() const override { return 1; }
  size_t outFeatures() const override { return channels_; }
  std::vector<ParamSpec> params() const override;
  void init(Random& random) override;
  // Throws std::invalid_argument for a token id outside the vocabulary.
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  // The ids get no gradient: dx, if any, is zeroed.
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void backwardWeights() override;

 private:
  size_t vocab_;
  size_t context_;
  size_t channels_;
  std::span<const float> x_;
  std::span<const float> dy_;  // the last backwardInput's
  size_t rows_ = 0;
};

}  // namespace loom::train
