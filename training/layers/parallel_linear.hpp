// Megatron's two halves of a linear layer split over a tensor group, so
// that a block needs one all-reduce forward and one backward:
//
//   column-parallel  y_r = x W_r^T + b_r, rank r holding a share of W's
//                    rows (outputs); x is the same on every rank (Megatron's
//                    f: identity forward), and backward all-reduces dL/dx,
//                    which each rank has only its outputs' part of, while
//                    it computes dL/dW (on the group's stream, if it has one).
//   row-parallel     y = sum_r x_r W_r^T + b, rank r holding a share of W's
//                    columns (inputs) and taking the matching share of x
//                    (what a column-parallel layer gave it); forward
//                    all-reduces the partial products (Megatron's g), then
//                    adds the bias, which every rank holds.
//
// An MLP is column (fc), GELU on the share, row (proj); attention is
// column (qkv, by heads), attention over the rank's heads, row (proj).
// Parameters are the dense twin's (Linear: W out x in, then b) dealt out
// by Layer::fromTwin. Under sequence parallelism the column-parallel layer
// gathers the rows first (f') and scatters dL/dx's sum back (its
// backward), and the row-parallel one reduce-scatters its output rows (g')
// and gathers dL/dy's rows in backward.
#pragma once

#include "training/layers/layer.hpp"
#include "training/layers/tensor_group.hpp"
#include "training/memory.hpp"

namespace loom::train {

class ColumnParallelLinear final : public Layer {
 public:
  // Outputs are `blocks` blocks of `units` x `unit` (qkv: 3 blocks of
  // heads x head size; fc: 1 block of 4C units of 1), each block dealt out
  // by units; inputs are `in`.
  ColumnParallelLinear(size_t in, size_t blocks, size_t units, size_t unit, bool bias, TensorGroup group,
                       MemoryAccount& account);
  std::string name() const override { return "column-linear"; }
  size_t inFeatures() const override { return in_; }
  size_t outFeatures() const override { return outputs(group_.rank); }
  size_t outRows(size_t rows) const override { return group_.sequence ? rows * static_cast<size_t>(group_.size) : rows; }
  std::vector<ParamSpec> params() const override;
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  void backward(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  // Split, dL/dx is summed at once (nothing to hide it under) and, in
  // sequence parallelism, made in a buffer of its own: x's gathered rows
  // wait for backwardWeights.
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void backwardWeights() override;
  void releaseActivations() override {
    rows_.release();
    dxRows_.release();
  }
  size_t twinCount() const override { return (in_ + (bias_ ? 1 : 0)) * blocks_ * units_ * unit_; }
  size_t shareCount(int rank) const override { return (in_ + (bias_ ? 1 : 0)) * outputs(rank); }
  void fromTwin(std::span<const float> twin, std::span<float> mine) const override;
  void toTwin(int rank, std::span<const float> share, std::span<float> twin) const override;
  void markReplicated(std::span<uint8_t> mask) const override { std::fill(mask.begin(), mask.end(), uint8_t{0}); }

 private:
  size_t outputs(int rank) const { return blocks_ * shareOf(units_, group_.size, rank).count * unit_; }
  // The twin's output row of `rank`'s local row j.
  size_t twinRow(int rank, size_t j) const;
  size_t in_, blocks_, units_, unit_;
  bool bias_;
  TensorGroup group_;
  std::span<const float> x_;
  Tracked<float> rows_;  // sequence parallel: every rank's rows of x, then of dL/dx
  std::span<const float> dy_;  // the last backwardInput's
  size_t backwardRows_ = 0;
  Tracked<float> dxRows_;  // backwardInput, sequence parallel: every rank's rows of dL/dx
};

class RowParallelLinear final : public SplitLayer {
 public:
  // Inputs are `units` x `unit`, dealt out by units as the column-parallel
  // layer before dealt its outputs; outputs are `out`, whole on every rank.
  RowParallelLinear(size_t units, size_t unit, size_t out, bool bias, TensorGroup group, MemoryAccount& account);
  std::string name() const override { return "row-linear"; }
  size_t inFeatures() const override { return inputs(group_.rank); }
  size_t outFeatures() const override { return out_; }
  size_t outRows(size_t rows) const override { return group_.sequence ? rows / static_cast<size_t>(group_.size) : rows; }
  std::vector<ParamSpec> params() const override;
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void backwardWeights() override;
  void releaseActivations() override { rows_.release(); }
  size_t twinCount() const override { return out_ * units_ * unit_ + (bias_ ? out_ : 0); }
  size_t shareCount(int rank) const override { return out_ * inputs(rank) + (bias_ ? out_ : 0); }
  void fromTwin(std::span<const float> twin, std::span<float> mine) const override;
  void toTwin(int rank, std::span<const float> share, std::span<float> twin) const override;
  void markReplicated(std::span<uint8_t> mask) const override;

 private:
  size_t inputs(int rank) const { return shareOf(units_, group_.size, rank).count * unit_; }
  size_t units_, unit_, out_;
  bool bias_;
  TensorGroup group_;
  std::span<const float> x_;
  Tracked<float> rows_;  // sequence parallel: the output's rows before the scatter, then dL/dy's gathered
  std::span<const float> dy_;  // the last backwardInput's, every rank's rows under sequence parallelism
  size_t backwardRows_ = 0;
};

}  // namespace loom::train
