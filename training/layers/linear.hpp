// y = x W^T + b, W stored out x in (as torch.nn.Linear), initialized as
// PyTorch does: both uniform in +-1/sqrt(in).
#pragma once

#include "training/layers/layer.hpp"

namespace loom::train {

class Linear final : public SplitLayer {
 public:
  Linear(size_t in, size_t out, bool bias = true) : in_(in), out_(out), bias_(bias) {}
  std::string name() const override { return "linear"; }
  size_t inFeatures() const override { return in_; }
  size_t outFeatures() const override { return out_; }
  std::vector<ParamSpec> params() const override;
  void init(Random& random) override;
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void backwardWeights() override;

 private:
  size_t in_;
  size_t out_;
  bool bias_;
  std::span<const float> x_;  // the last forward's input
  std::span<const float> dy_;  // the last backwardInput's dL/dy
  size_t rows_ = 0;
};

}  // namespace loom::train
