#include "training/layers/parallel_linear.hpp"

#include "training/math/bias.hpp"
#include "training/math/gemm.hpp"

namespace loom::train {
ColumnParallelLinear::ColumnParallelLinear(size_t in, size_t blocks, size_t units, size_t unit, bool bias,
                                           TensorGroup group, MemoryAccount& account)
    : in_(in), blocks_(blocks), units_(units), unit_(unit), bias_(bias), group_(group),
      rows_(account, Category::Activations), dxRows_(account, Category::Activations) {}

std::vector<ParamSpec> ColumnParallelLinear::params() const {
  std::vector<ParamSpec> p{{"weight", in_ * outFeatures()}};
  if (bias_) p.push_back({"bias", outFeatures()});
  return p;
}

size_t ColumnParallelLinear::twinRow(int rank, size_t j) const {
  const Share share = shareOf(units_, group_.size, rank);
  const size_t perBlock = share.count * unit_;
  return j / perBlock * units_ * unit_ + share.first * unit_ + j % perBlock;
}

void ColumnParallelLinear::fromTwin(std::span<const float> twin, std::span<float> mine) const {
  const size_t out = outFeatures(), twinOut = blocks_ * units_ * unit_;
  for (size_t j = 0; j < out; ++j) {
    const size_t row = twinRow(group_.rank, j);
    std::copy_n(twin.data() + row * in_, in_, mine.data() + j * in_);
    if (bias_) mine[in_ * out + j] = twin[in_ * twinOut + row];
  }
}

void ColumnParallelLinear::toTwin(int rank, std::span<const float> share, std::span<float> twin) const {
  const size_t out = outputs(rank), twinOut = blocks_ * units_ * unit_;
  for (size_t j = 0; j < out; ++j) {
    const size_t row = twinRow(rank, j);
    std::copy_n(share.data() + j * in_, in_, twin.data() + row * in_);
    if (bias_) twin[in_ * twinOut + row] = share[in_ * out + j];
  }
}

void ColumnParallelLinear::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  x_ = x;
  if (group_.sequence) {  // f': every rank's rows
    rows_.resize(outRows(rows) * in_);
    group_.allGatherRows(x.first(rows * in_), rows_.span());
    x_ = rows_.span();
    rows = outRows(rows);
  }
  const size_t out = outFeatures();
  gemm(Transpose::No, Transpose::Yes, rows, out, in_, x_.data(), params_.data(), y.data());
  if (bias_) addBias(y, params_.data() + in_ * out, rows, out);
}

void ColumnParallelLinear::backward(std::span<const float> dy, std::span<float> dx, size_t rows) {
  const size_t out = outFeatures(), all = outRows(rows);
  const bool overlap = !dx.empty() && !group_.sequence;
  if (overlap) {  // f's backward: every rank's outputs contributed to dL/dx; summed under dW's product
    gemm(Transpose::No, Transpose::No, rows, in_, out, dy.data(), params_.data(), dx.data());
    group_.startAllReduce(dx.first(rows * in_));
  }
  gemm(Transpose::Yes, Transpose::No, out, in_, all, dy.data(), x_.data(), grads_.data());
  if (bias_) biasGradient(dy, grads_.data() + in_ * out, all, out);
  if (overlap) return group_.finish();
  if (dx.empty()) return;
  // f''s backward: dL/dx of every row, summed over the ranks, each keeping its rows.
  rows_.resize(all * in_);  // x's gathered rows are no longer needed
  gemm(Transpose::No, Transpose::No, all, in_, out, dy.data(), params_.data(), rows_.data());
  group_.reduceScatterRows(rows_.span(), dx.first(rows * in_));
}

void ColumnParallelLinear::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) {
  dy_ = dy;
  backwardRows_ = rows;
  if (dx.empty()) return;
  const size_t out = outFeatures();
  if (!group_.sequence) {  // f's backward
    gemm(Transpose::No, Transpose::No, rows, in_, out, dy.data(), params_.data(), dx.data());
    group_.startAllReduce(dx.first(rows * in_));
    return group_.finish();
  }
  const size_t all = outRows(rows);  // f''s backward
  dxRows_.resize(all * in_);
  gemm(Transpose::No, Transpose::No, all, in_, out, dy.data(), params_.data(), dxRows_.data());
  group_.reduceScatterRows(dxRows_.span(), dx.first(rows * in_));
}

void ColumnParallelLinear::backwardWeights() {
  const size_t out = outFeatures(), all = outRows(backwardRows_);
  gemm(Transpose::Yes, Transpose::No, out, in_, all, dy_.data(), x_.data(), grads_.data());
  if (bias_) biasGradient(dy_, grads_.data() + in_ * out, all, out);
}

RowParallelLinear::RowParallelLinear(size_t units, size_t unit, size_t out, bool bias, TensorGroup group,
                                     MemoryAccount& account)
    : units_(units), unit_(unit), out_(out), bias_(bias), group_(group), rows_(account, Category::Activations) {}

std::vector<ParamSpec> RowParallelLinear::params() const {
  std::vector<ParamSpec> p{{"weight", inFeatures() * out_}};
  if (bias_) p.push_back({"bias", out_});
  return p;
}

void RowParallelLinear::fromTwin(std::span<const float> twin, std::span<float> mine) const {
  const size_t in = inFeatures(), twinIn = units_ * unit_;
  const size_t first = shareOf(units_, group_.size, group_.rank).first * unit_;
  for (size_t o = 0; o < out_; ++o) std::copy_n(twin.data() + o * twinIn + first, in, mine.data() + o * in);
  if (bias_) std::copy_n(twin.data() + out_ * twinIn, out_, mine.data() + out_ * in);
}

void RowParallelLinear::toTwin(int rank, std::span<const float> share, std::span<float> twin) const {
  const size_t in = inputs(rank), twinIn = units_ * unit_;
  const size_t first = shareOf(units_, group_.size, rank).first * unit_;
  for (size_t o = 0; o < out_; ++o) std::copy_n(share.data() + o * in, in, twin.data() + o * twinIn + first);
  if (bias_) std::copy_n(share.data() + out_ * in, out_, twin.data() + out_ * twinIn);
}

void RowParallelLinear::markReplicated(std::span<uint8_t> mask) const {
  std::fill(mask.begin(), mask.end(), uint8_t{0});
  if (bias_) std::fill(mask.end() - static_cast<std::ptrdiff_t>(out_), mask.end(), uint8_t{1});
}

void RowParallelLinear::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  x_ = x;
  const size_t in = inFeatures(), mine = outRows(rows);
  if (!group_.sequence) {
    gemm(Transpose::No, Transpose::Yes, rows, out_, in, x.data(), params_.data(), y.data());
    group_.allReduce(y.first(rows * out_));  // g: the partial products of every rank's inputs, summed
  } else {
    rows_.resize(rows * out_);
    gemm(Transpose::No, Transpose::Yes, rows, out_, in, x.data(), params_.data(), rows_.data());
    group_.reduceScatterRows(rows_.span(), y.first(mine * out_));  // g': summed, each keeping its rows
  }
  if (bias_) addBias(y, params_.data() + in * out_, mine, out_);
}

void RowParallelLinear::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) {
  const size_t in = inFeatures();
  if (group_.sequence) {  // g''s backward: every rank's rows of dL/dy
    rows_.resize(rows * out_);
    group_.allGatherRows(dy.first(outRows(rows) * out_), rows_.span());
    dy = rows_.span();
  }
  dy_ = dy;
  backwardRows_ = rows;
  if (!dx.empty()) gemm(Transpose::No, Transpose::No, rows, in, out_, dy.data(), params_.data(), dx.data());
}

void RowParallelLinear::backwardWeights() {
  const size_t in = inFeatures();
  gemm(Transpose::Yes, Transpose::No, out_, in, backwardRows_, dy_.data(), x_.data(), grads_.data());
  if (bias_) biasGradient(dy_, grads_.data() + in * out_, backwardRows_, out_);
}

}  // namespace loom::train
