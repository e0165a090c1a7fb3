#include "training/parallel/micro_batch.hpp"

#include <stdexcept>
#include <string>

#include "training/layers/cross_entropy.hpp"

namespace loom::train {

WorkSplit splitWork(const TrainConfig& config, const Model& model, const Dataset& data, int ranks) {
  const auto n = static_cast<size_t>(ranks);
  if (config.microBatches == 0 || config.microBatches % n != 0) {
    throw std::invalid_argument("--micro-batches " + std::to_string(config.microBatches) +
                                " does not split over " + std::to_string(n) + " ranks");
  }
  if (config.batch % config.microBatches != 0) {
    throw std::invalid_argument("--batch " + std::to_string(config.batch) + " does not split into " +
                                std::to_string(config.microBatches) + " micro-batches");
  }
  if (data.features() != data.rowsPerSample() * model.inFeatures() || data.classes() != model.outFeatures()) {
    throw std::invalid_argument("the model takes " + std::to_string(model.inFeatures()) + " inputs per row to " +
                                std::to_string(model.outFeatures()) + " classes, the data has " +
                                std::to_string(data.features()) + " per " + std::to_string(data.rowsPerSample()) +
                                " rows and " + std::to_string(data.classes()) + " classes");
  }
  return {config.microBatches / n, config.batch / config.microBatches};
}

template <class T>
void sumMicroBatch(std::span<T> grads, std::span<float> sum, bool first, bool last) {
  for (size_t i = 0; i < grads.size(); ++i) sum[i] = first ? toFloat(grads[i]) : sum[i] + toFloat(grads[i]);
  if constexpr (std::is_same_v<T, bf16>) {
    if (last) narrow(std::span<const float>(sum), grads);
  }
}
template void sumMicroBatch(std::span<float>, std::span<float>, bool, bool);
template void sumMicroBatch(std::span<bf16>, std::span<float>, bool, bool);

double MicroBatch::run(Model& model, const Dataset& data, std::span<const size_t> samples,
                       const Model::Hooks* hooks) {
  const size_t rows = samples.size() * data.rowsPerSample();
  x_.resize(samples.size() * data.features());
  labels_.resize(rows);
  gather(data, samples, x_.span(), labels_);
  const auto logits = model.forward(x_.span(), rows, hooks);
  dlogits_.resize(logits.size());
  const double loss = crossEntropy(logits, labels_, rows, model.outFeatures(), dlogits_.span());
  model.backward(dlogits_.span(), rows, hooks);
  return loss;
}

}  // namespace loom::train
