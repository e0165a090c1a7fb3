// Megatron's vocabulary-parallel embedding: rank r holds a share of the
// token table's rows (wte) and the whole position table (wpe). Each rank
// looks up the tokens in its share (zero for the rest), the ranks' rows
// are all-reduced (exactly one is not zero), and the position is added:
// bit for bit the dense Embedding's wte[token] + wpe[position]. Under
// sequence parallelism the rows are reduce-scattered instead (g'), each
// rank keeping its share of them, and backward gathers dL/dy's rows.
#pragma once

#include "training/layers/layer.hpp"
#include "training/layers/tensor_group.hpp"
#include "training/memory.hpp"

namespace loom::train {

class VocabParallelEmbedding final : public SplitLayer {
 public:
  VocabParallelEmbedding(size_t vocab, size_t context, size_t channels, TensorGroup group, MemoryAccount& account)
      : vocab_(vocab), context_(context), channels_(channels), group_(group), rows_(account, Category::Activations) {}
  std::string name() const override { return "vocab-embedding"; }
  size_t inFeatures() const override { return 1; }
  size_t outFeatures() const override { return channels_; }
  size_t outRows(size_t rows) const override { return group_.sequence ? rows / static_cast<size_t>(group_.size) : rows; }
  std::vector<ParamSpec> params() const override;
  // Throws std::invalid_argument for a token id outside the vocabulary.
  void forward(std::span<const float> x, std::span<float> y, size_t rows) override;
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) override;
  void backwardWeights() override;
  void releaseActivations() override { rows_.release(); }
  size_t twinCount() const override { return (vocab_ + context_) * channels_; }
  size_t shareCount(int rank) const override {
    return (shareOf(vocab_, group_.size, rank).count + context_) * channels_;
  }
  void fromTwin(std::span<const float> twin, std::span<float> mine) const override;
  void toTwin(int rank, std::span<const float> share, std::span<float> twin) const override;
  void markReplicated(std::span<uint8_t> mask) const override;

 private:
  size_t vocab_, context_, channels_;
  TensorGroup group_;
  std::span<const float> x_;
  std::span<const float> dy_;  // the last backwardInput's, every rank's rows under sequence parallelism
  size_t backwardRows_ = 0;
  Tracked<float> rows_;  // sequence parallel: every row's lookup, then dL/dy's rows gathered
};

}  // namespace loom::train
