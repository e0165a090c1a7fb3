// A labelled dataset the trainer draws batches from, and the plan that
// decides which samples make each step's global batch: a seeded
// permutation per epoch, so every rank computes the same plan and reads
// only its own share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom::train {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  // Rows per sample, each with one label: 1 for an image, the context for a text window.
  virtual size_t rowsPerSample() const { return 1; }
  virtual size_t features() const = 0;  // inputs per sample (rowsPerSample() rows of them)
  virtual size_t classes() const = 0;
  // Sample i's inputs (features() floats) and labels (rowsPerSample()).
  virtual void sample(size_t i, std::span<float> x, std::span<int32_t> labels) const = 0;
};

// The samples of each step's global batch: step s takes positions
// s x batch ... of an endless sequence of epochs, each a permutation of the
// dataset; epoch e is Shuffle(size, seed + e) (shuffle.hpp), computed one
// position at a time, so a step costs O(batch) however large the dataset,
// and every rank computes the same plan and reads only its own share.
class BatchPlan {
 public:
  BatchPlan(size_t datasetSize, size_t batch, uint64_t seed);
  // The sample indices of step `step`'s global batch, in order.
  std::vector<size_t> step(uint64_t step) const;
  // Feistel passes taken by every step() so far (the plan's work).
  uint64_t passes() const { return passes_; }

 private:
  size_t size_;
  size_t batch_;
  uint64_t seed_;
  mutable uint64_t passes_ = 0;
};

// Gathers the samples into x and labels, one after another.
void gather(const Dataset& dataset, std::span<const size_t> samples, std::span<float> x,
            std::span<int32_t> labels);

}  // namespace loom::train
