// Optimizers over a range of the flat parameter buffer: the whole model for
// single and DDP, the rank's own shard for ZeRO. The state (moments,
// velocity) covers that range only, and is the checkpoint's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "training/memory.hpp"

namespace loom::train {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // params -= update(grads) at learning rate lr; both span the optimizer's range.
  virtual void step(std::span<float> params, std::span<const float> grads, float lr) = 0;
  // Everything a checkpoint must hold to continue bit for bit.
  virtual std::span<float> state() = 0;
  virtual uint64_t steps() const = 0;
  virtual void setSteps(uint64_t steps) = 0;
};

// AdamW as torch.optim.AdamW (1.13, single tensor) computes it: decoupled
// weight decay, then the moments with bias correction.
struct AdamWSettings {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weightDecay = 0.0f;
};

// SGD with momentum as torch.optim.SGD (dampening 0, not Nesterov).
struct SgdSettings {
  float momentum = 0.9f;
  float weightDecay = 0.0f;
};

std::unique_ptr<Optimizer> makeAdamW(MemoryAccount& account, size_t count, AdamWSettings settings);
std::unique_ptr<Optimizer> makeSgd(MemoryAccount& account, size_t count, SgdSettings settings);

// The learning rate at `step` (from 0): linear warm-up over `warmup` steps,
// then a cosine from `base` down to `min` at `total`.
float learningRate(uint64_t step, uint64_t warmup, uint64_t total, float base, float min);

// Sum of squares, accumulated in double in element order.
double sumOfSquares(std::span<const float> values);
// Scales grads so that the global norm sqrt(sumOfSquares) is at most maxNorm
// (maxNorm <= 0: no clipping); returns the norm before clipping.
double clipToNorm(std::span<float> grads, double sumSquares, double maxNorm);

}  // namespace loom::train
