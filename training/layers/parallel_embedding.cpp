#include "training/layers/parallel_embedding.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace loom::train {

std::vector<ParamSpec> VocabParallelEmbedding::params() const {
  return {{"wte", shareOf(vocab_, group_.size, group_.rank).count * channels_}, {"wpe", context_ * channels_}};
}

void VocabParallelEmbedding::fromTwin(std::span<const float> twin, std::span<float> mine) const {
  const Share s = shareOf(vocab_, group_.size, group_.rank);
  std::copy_n(twin.data() + s.first * channels_, s.count * channels_, mine.data());
  std::copy_n(twin.data() + vocab_ * channels_, context_ * channels_, mine.data() + s.count * channels_);
}

void VocabParallelEmbedding::toTwin(int rank, std::span<const float> share, std::span<float> twin) const {
  const Share s = shareOf(vocab_, group_.size, rank);
  std::copy_n(share.data(), s.count * channels_, twin.data() + s.first * channels_);
  std::copy_n(share.data() + s.count * channels_, context_ * channels_, twin.data() + vocab_ * channels_);
}

void VocabParallelEmbedding::markReplicated(std::span<uint8_t> mask) const {
  const size_t wte = shareOf(vocab_, group_.size, group_.rank).count * channels_;
  std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(wte), uint8_t{0});
  std::fill(mask.begin() + static_cast<std::ptrdiff_t>(wte), mask.end(), uint8_t{1});
}

void VocabParallelEmbedding::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  x_ = x;
  const Share s = shareOf(vocab_, group_.size, group_.rank);
  if (group_.sequence) rows_.resize(rows * channels_);
  const float* wte = params_.data();
  const float* wpe = params_.data() + s.count * channels_;
  for (size_t r = 0; r < rows; ++r) {
    const auto token = static_cast<size_t>(x[r]);
    if (x[r] < 0 || token >= vocab_ || static_cast<float>(token) != x[r]) {
      throw std::invalid_argument("row " + std::to_string(r) + " holds token " + std::to_string(x[r]) +
                                  ", not one of " + std::to_string(vocab_));
    }
    float* out = (group_.sequence ? rows_.data() : y.data()) + r * channels_;
    if (token >= s.first && token < s.first + s.count) {
      std::copy_n(wte + (token - s.first) * channels_, channels_, out);
    } else {
      std::fill_n(out, channels_, 0.0f);
    }
  }
  const size_t mine = outRows(rows), first = group_.sequence ? mine * static_cast<size_t>(group_.rank) : 0;
  if (group_.sequence) {
    group_.reduceScatterRows(rows_.span(), y.first(mine * channels_));
  } else {
    group_.allReduce(y.first(rows * channels_));
  }
  for (size_t r = 0; r < mine; ++r) {
    const float* p = wpe + ((first + r) % context_) * channels_;
    float* out = y.data() + r * channels_;
    for (size_t c = 0; c < channels_; ++c) out[c] += p[c];
  }
}

void VocabParallelEmbedding::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) {
  dy_ = dy;
  backwardRows_ = rows;
  if (group_.sequence) {  // every rank's rows of dL/dy
    rows_.resize(rows * channels_);
    group_.allGatherRows(dy.first(outRows(rows) * channels_), rows_.span());
    dy_ = rows_.span();
  }
  std::fill(dx.begin(), dx.end(), 0.0f);
}

void VocabParallelEmbedding::backwardWeights() {
  const Share s = shareOf(vocab_, group_.size, group_.rank);
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  float* dwte = grads_.data();
  float* dwpe = grads_.data() + s.count * channels_;
  for (size_t r = 0; r < backwardRows_; ++r) {  // rows in order, as Embedding sums them
    const auto token = static_cast<size_t>(x_[r]);
    const bool mine = token >= s.first && token < s.first + s.count;
    float* e = dwte + (mine ? token - s.first : 0) * channels_;
    float* p = dwpe + (r % context_) * channels_;
    const float* d = dy_.data() + r * channels_;
    for (size_t c = 0; c < channels_; ++c) {
      if (mine) e[c] += d[c];
      p[c] += d[c];
    }
  }
}

}  // namespace loom::train
