// One optimizer step over a range of the flat buffers (the whole model for
// single and ddp, the rank's shards for ZeRO), in the model's precision.
// The gradients are the micro-batches' sum; the step scales each by `mean`
// (1/M), then by `clip` (clipScale of the global norm; 1 when within it),
// then updates, so both precisions do the same float arithmetic:
//
//   fp32  in place on the gradients, then the optimizer on the parameters.
//   bf16  on the gradients widened a block at a time, the optimizer on fp32
//         master weights of the range (optimizer state, 4 bytes a parameter
//         beside the moments' 8), which are then narrowed into the bf16
//         parameters: ZeRO's 2 + 2 + 12 bytes per parameter.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "training/math/bf16.hpp"
#include "training/memory.hpp"
#include "training/optim/optimizer.hpp"
#include "training/parallel/trainer.hpp"

namespace loom::train {

template <class T>
class Update;

// `values`, then each of the optimizer's per-parameter arrays over the same range.
std::vector<std::span<float>> withOptimizer(Optimizer& optimizer, std::span<float> values);

template <>
class Update<float> {
 public:
  Update(MemoryAccount& account, size_t count, const TrainConfig& config);
  void load(std::span<const float> /*params*/) {}
  // The gradients' sum of squares once scaled by `mean`, in double, in
  // element order, added to `from` (a sum over the elements before them).
  double sumOfSquares(std::span<const float> grads, float mean, double from = 0) const;
  void step(std::span<float> params, std::span<float> grads, float mean, float clip, float lr);
  // The state's components over the range (checkpoint.hpp): the
  // parameters, then the optimizer's.
  std::vector<std::span<float>> components(std::span<float> params) { return withOptimizer(*optimizer_, params); }
  void restored(std::span<float> /*params*/) {}
  Optimizer& optimizer() { return *optimizer_; }

 private:
  std::unique_ptr<Optimizer> optimizer_;
};

template <>
class Update<bf16> {
 public:
  Update(MemoryAccount& account, size_t count, const TrainConfig& config);
  // The master weights from the parameters (at the start).
  void load(std::span<const bf16> params);
  double sumOfSquares(std::span<const bf16> grads, float mean, double from = 0) const;
  void step(std::span<bf16> params, std::span<bf16> grads, float mean, float clip, float lr);
  // The state's components over the range (checkpoint.hpp): the master
  // weights (the parameters are them, narrowed), then the optimizer's.
  std::vector<std::span<float>> components(std::span<bf16> /*params*/) {
    return withOptimizer(*optimizer_, master_.span());
  }
  // After components() were filled: the parameters from the master weights.
  void restored(std::span<bf16> params);
  Optimizer& optimizer() { return *optimizer_; }

 private:
  std::unique_ptr<Optimizer> optimizer_;
  Tracked<float> master_;
  Tracked<float> block_;  // one block of widened gradients (working memory)
};

}  // namespace loom::train
