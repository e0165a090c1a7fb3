#include "training/data/dataset.hpp"

#include <numeric>
#include <stdexcept>

#include "training/random.hpp"

namespace loom::train {

BatchPlan::BatchPlan(size_t datasetSize, size_t batch, uint64_t seed) : size_(datasetSize), batch_(batch), seed_(seed) {
  if (batch == 0) throw std::invalid_argument("the batch must hold at least one sample");
  if (datasetSize == 0) throw std::invalid_argument("the dataset is empty");
}

std::vector<size_t> BatchPlan::permutation(uint64_t epoch) const {
  std::vector<size_t> order(size_);
  std::iota(order.begin(), order.end(), size_t{0});
  Random random(seed_ + epoch);
  for (size_t i = size_; i > 1; --i) std::swap(order[i - 1], order[random.below(i)]);
  return order;
}

std::vector<size_t> BatchPlan::step(uint64_t step) const {
  std::vector<size_t> out;
  out.reserve(batch_);
  uint64_t position = step * batch_;
  uint64_t epoch = position / size_;
  std::vector<size_t> order = permutation(epoch);
  while (out.size() < batch_) {
    if (position / size_ != epoch) order = permutation(epoch = position / size_);
    out.push_back(order[position % size_]);
    ++position;
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
