// Causal multi-head self-attention (Vaswani et al. 2017, as GPT-2 uses it)
// on rows of q, k and v side by side (3 x channels: the output of the
// linear layer before it), `context` rows per sequence: for each head, row t
// attends to rows 0..t of its sequence with softmax(q k^T / sqrt(head size)),
// and the heads' outputs sit side by side (channels). No parameters; keeps
// the attention weights (sequences x heads x context x context) for backward.
#pragma once

#include "training/layers/layer.hpp"
#include "training/memory.hpp"

namespace loom::train {

class CausalSelfAttention final : public Layer {
 public:
  // Throws std::invalid_argument unless heads divide channels.
  CausalSelfAttention(size_t channels, size_t heads, size_t context, MemoryAccount& account);
  std::string name() const override { return "attention"; }
  size_t inFeatures() const override { return 3 * channels_; }
  size_t outFeatures() const override { return channels_; }
  // rows must be whole sequences (a multiple of context).
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  void backward(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void releaseActivations() override {
    att_.release();
    scratch_.release();
  }

 private:
  size_t channels_;
  size_t heads_;
  size_t context_;
  std::span<const float> qkv_;
  Tracked<float> att_;
  Tracked<float> scratch_;  // one head's dS in backward
};

}  // namespace loom::train
