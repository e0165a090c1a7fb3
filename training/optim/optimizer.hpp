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
  // One step at learning rate lr, given in consecutive blocks: begin() once,
  // then update() for [at, at + params.size()) of the optimizer's range, in
  // order, until the range is covered (mixed precision widens the
  // gradients a block at a time).
  virtual void begin() = 0;
  virtual void update(std::span<float> params, std::span<const float> grads, float lr, size_t at) = 0;
  // params -= update(grads) at learning rate lr; both span the optimizer's range.
  void step(std::span<float> params, std::span<const float> grads, float lr) {
    begin();
    update(params, grads, lr, 0);
  }
  // Everything a checkpoint must hold to continue bit for bit: components()
  // per-parameter arrays over the range, one after another (AdamW: m, v).
  virtual std::span<float> state() = 0;
  virtual size_t components() const = 0;
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
// The factor that brings the global norm sqrt(sumSquares) down to maxNorm
// (torch's clip_grad_norm_: maxNorm / (norm + 1e-6)), or 1 when it is within
// it or maxNorm <= 0 (no clipping).
float clipScale(double sumSquares, double maxNorm);
// Scales grads so that the global norm sqrt(sumOfSquares) is at most maxNorm
// (maxNorm <= 0: no clipping); returns the norm before clipping.
double clipToNorm(std::span<float> grads, double sumSquares, double maxNorm);

}  // namespace loom::train
