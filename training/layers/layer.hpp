// A layer with an explicit forward and backward over flat buffers (llm.c's
// shape). The model binds each layer to its slice of the model's flat
// parameter and gradient buffers, so that sharding a model (ZeRO) or cutting
// it into stages (pipeline) is a matter of which slices are where.
//
// Activations are `rows` x features, row-major: a row is a sample (an MLP)
// or a token (a GPT, rows = batch x sequence).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "training/random.hpp"

namespace loom::train {

struct ParamSpec {
  std::string name;
  size_t count;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string name() const = 0;
  virtual size_t inFeatures() const = 0;
  virtual size_t outFeatures() const = 0;
  // This layer's parameters, in the order they sit in its slice.
  virtual std::vector<ParamSpec> params() const { return {}; }
  size_t paramCount() const {
    size_t n = 0;
    for (const auto& p : params()) n += p.count;
    return n;
  }
  // Fills the bound parameters as the model's initialization says (seeded).
  virtual void init(Random& /*random*/) {}

  // Tensor parallelism (Megatron): a layer may hold a share of the
  // parameters of its dense twin, the layer one process would hold, and
  // its rank's share is what makes it equal to the twin. These move shares
  // between the twin's layout and a rank's; the defaults are a replicated
  // layer's, which holds all of them.
  virtual size_t twinCount() const { return paramCount(); }
  virtual size_t shareCount(int /*rank*/) const { return paramCount(); }
  virtual void fromTwin(std::span<const float> twin, std::span<float> mine) const {
    std::copy(twin.begin(), twin.end(), mine.begin());
  }
  virtual void toTwin(int /*rank*/, std::span<const float> share, std::span<float> twin) const {
    std::copy(share.begin(), share.end(), twin.begin());
  }
  // Sets 1 where this rank's parameter is also on every other rank of the
  // group (its gradient counts once in the global norm), 0 where it is a share.
  virtual void markReplicated(std::span<uint8_t> mask) const { std::fill(mask.begin(), mask.end(), uint8_t{1}); }

  void bind(std::span<float> params, std::span<float> grads) {
    params_ = params;
    grads_ = grads;
    bound();
  }

  // Rows of output for `rows` rows of input: the same, but where a layer
  // gathers or scatters rows over a tensor group (sequence parallelism).
  virtual size_t outRows(size_t rows) const { return rows; }
  // y = f(x) for `rows` rows. x stays valid and unchanged until backward.
  virtual void forward(std::span<const float> x, std::span<float> y, size_t rows) = 0;
  // From dL/dy: writes (does not add) this layer's parameter gradients, and
  // dL/dx unless dx is empty (the first layer needs none).
  virtual void backward(std::span<const float> dy, std::span<float> dx, size_t rows) = 0;
  // The same backward in two halves, for zero-bubble pipelines (Qi et al.
  // 2024): backwardInput writes dL/dx alone, what the layer before waits
  // for, and keeps what the parameter gradients need (dy must stay valid
  // and unchanged until then); backwardWeights writes those gradients. The
  // two give backward's bits, whatever ran between them on other stashes
  // of the same parameters. A layer without parameters does all of it in
  // backwardInput (these defaults).
  virtual void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) { backward(dy, dx, rows); }
  virtual void backwardWeights() {}
  // Frees what forward kept for backward (activation recompute): the next
  // backward needs a forward first.
  virtual void releaseActivations() {}

 protected:
  // After bind(): a layer that holds others binds them here.
  virtual void bound() {}

  std::span<float> params_;
  std::span<float> grads_;
};

// A layer whose backward is its two halves back to back, which it must define.
class SplitLayer : public Layer {
 public:
  void backward(std::span<const float> dy, std::span<float> dx, size_t rows) final {
    backwardInput(dy, dx, rows);
    backwardWeights();
  }
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) override = 0;
  void backwardWeights() override = 0;
};

}  // namespace loom::train
