#include "training/data/dataset.hpp"

#include <stdexcept>

#include "training/data/shuffle.hpp"

namespace loom::train {

BatchPlan::BatchPlan(size_t datasetSize, size_t batch, uint64_t seed) : size_(datasetSize), batch_(batch), seed_(seed) {
  if (batch == 0) throw std::invalid_argument("the batch must hold at least one sample");
  if (datasetSize == 0) throw std::invalid_argument("the dataset is empty");
}

std::vector<size_t> BatchPlan::step(uint64_t step) const {
  std::vector<size_t> out;
  out.reserve(batch_);
  for (uint64_t position = step * batch_; out.size() < batch_; ++position) {
    const uint64_t epoch = position / size_;
    const Shuffle order(size_, seed_ + epoch);  // a key and a mask: nothing of O(size)
    out.push_back(static_cast<size_t>(order(position % size_, &passes_)));
  }
  return out;
}

void gather(const Dataset& dataset, std::span<const size_t> samples, std::span<float> x,
            std::span<int32_t> labels) {
  const size_t f = dataset.features();
  const size_t l = dataset.rowsPerSample();
  for (size_t i = 0; i < samples.size(); ++i) dataset.sample(samples[i], x.subspan(i * f, f), labels.subspan(i * l, l));
}

}  // namespace loom::train
