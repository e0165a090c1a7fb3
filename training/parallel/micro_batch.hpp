// What every mode does with one micro-batch: gather its samples, forward,
// the loss and its gradient, backward (with the mode's hooks), and the
// checks every mode makes of its configuration.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "training/data/dataset.hpp"
#include "training/memory.hpp"
#include "training/model.hpp"
#include "training/parallel/trainer.hpp"

namespace loom::train {

// How a step's global batch is cut: micro-batches per rank and samples per micro-batch.
struct WorkSplit {
  size_t perRank;
  size_t microSize;
};
// std::invalid_argument naming the flag unless the batch splits evenly.
WorkSplit splitWork(const TrainConfig& config, const Model& model, const Dataset& data, int ranks);

// One micro-batch's gradients into the step's float32 sum, in micro-batch
// order: the first copied, the rest added. In bf16 the last also rounds the
// sum into the gradients (once), which are then what the ranks reduce.
template <class T>
void sumMicroBatch(std::span<T> grads, std::span<float> sum, bool first, bool last);

class MicroBatch {
 public:
  explicit MicroBatch(MemoryAccount& account) : x_(account, Category::Activations), dlogits_(account, Category::Activations) {}
  // Forward and backward of `samples`; the mean loss over their rows.
  double run(Model& model, const Dataset& data, std::span<const size_t> samples, const Model::Hooks* hooks);

 private:
  Tracked<float> x_;
  std::vector<int32_t> labels_;
  Tracked<float> dlogits_;
};

}  // namespace loom::train
