// A residual branch (He et al. 2016; GPT-2's x + attn(ln(x)) and
// x + mlp(ln(x))): y = x + f(x) for a sequence f whose output has x's width.
// Its parameters are the sequence's, one after another.
//
// With recompute (activation checkpointing, Chen et al. 2016, as
// Megatron's and llm.c's): forward keeps nothing of f's activations but x
// (which its caller keeps anyway); backward runs f's forward again on x,
// then its backward, then frees them. The same arithmetic on the same
// inputs: the gradients are the same bits, and only one branch's
// activations are alive at a time.
#pragma once

#include "training/layers/layer.hpp"
#include "training/sequence.hpp"

namespace loom::train {

class Residual final : public Layer {
 public:
  // Throws std::invalid_argument unless `branch` maps features to features.
  Residual(std::string name, Sequence branch, bool recompute = false);
  std::string name() const override { return name_; }
  size_t inFeatures() const override { return branch_.inFeatures(); }
  size_t outFeatures() const override { return branch_.outFeatures(); }
  std::vector<ParamSpec> params() const override;
  void init(Random& random) override { branch_.init(random); }
  size_t twinCount() const override { return branch_.twinCount(); }
  size_t shareCount(int rank) const override { return branch_.shareCount(rank); }
  void fromTwin(std::span<const float> twin, std::span<float> mine) const override { branch_.fromTwin(twin, mine); }
  void toTwin(int rank, std::span<const float> share, std::span<float> twin) const override {
    branch_.toTwin(rank, share, twin);
  }
  void markReplicated(std::span<uint8_t> mask) const override { branch_.markReplicated(mask); }
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  void backward(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  // The branch's two halves (Sequence::backwardInput, ::backwardWeights);
  // with recompute the activations run again live until the second.
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void backwardWeights() override;
  void releaseActivations() override {
    branch_.releaseActivations();
    dxBranch_.release();
  }
  Sequence& branch() { return branch_; }

 private:
  void bound() override { branch_.bind(params_, grads_); }

  std::string name_;
  Sequence branch_;
  bool recompute_;
  std::span<const float> x_;  // recompute: forward's input, which backward runs the branch on again
  Tracked<float> dxBranch_;
};

}  // namespace loom::train
