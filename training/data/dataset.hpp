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

// The samples of each step's global batch: step s takes the next `batch`
// positions of an endless sequence of permutations of the dataset, epoch e
// shuffled (Fisher-Yates) by Random(seed + e).
class BatchPlan {
 public:
  BatchPlan(size_t datasetSize, size_t batch, uint64_t seed);
  // The sample indices of step `step`'s global batch, in order.
  std::vector<size_t> step(uint64_t step) const;

 private:
  std::vector<size_t> permutation(uint64_t epoch) const;
  size_t size_;
  size_t batch_;
  uint64_t seed_;
};

// Gathers the samples into x and labels, one after another.
void gather(const Dataset& dataset, std::span<const size_t> samples, std::span<float> x,
            std::span<int32_t> labels);

}  // namespace loom::train
