// Layers run one after another over `rows` rows, with the buffers between
// them: each layer's output, and two for the gradient flowing back. A model
// is one; a residual branch holds another.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "training/layers/layer.hpp"
#include "training/memory.hpp"

namespace loom::train {

class Sequence {
 public:
  // Where one layer's parameters sit, from the sequence's first.
  struct Slice {
    size_t offset;
    size_t count;
  };
  using LayerDone = std::function<void(size_t layer)>;
  // Called around each layer, in the order the pass visits them; any may be empty.
  struct Hooks {
    LayerDone beforeForward;
    LayerDone afterForward;
    LayerDone beforeBackward;
    LayerDone afterBackward;  // the layer's gradients are written
  };

  explicit Sequence(MemoryAccount& account) : account_(account) {}
  MemoryAccount& account() const { return account_; }

  // Throws std::invalid_argument when `layer` does not take what the last one gives.
  void add(std::unique_ptr<Layer> layer);
  // Moves layers first..last into a new sequence; their places here are
  // empty (null) afterwards.
  Sequence take(size_t first, size_t last);
  // The layers' parameters, laid out one after another.
  const std::vector<Slice>& slices() const { return slices_; }
  size_t paramCount() const { return paramCount_; }
  // Binds each layer to its slice of `params` and `grads` (paramCount() long each).
  void bind(std::span<float> params, std::span<float> grads);
  // Every layer draws from `random` in turn.
  void init(Random& random);

  // Layer::twinCount and friends, over the layers one after another.
  size_t twinCount() const;
  size_t shareCount(int rank) const;
  void fromTwin(std::span<const float> twin, std::span<float> mine) const;
  void toTwin(int rank, std::span<const float> share, std::span<float> twin) const;
  void markReplicated(std::span<uint8_t> mask) const;

  size_t layers() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_[i]; }
  const Layer& layer(size_t i) const { return *layers_[i]; }
  size_t inFeatures() const { return layers_.front()->inFeatures(); }
  size_t outFeatures() const { return layers_.back()->outFeatures(); }

  // Rows out of the last layer for `rows` in (Layer::outRows along the way).
  size_t outRows(size_t rows) const;
  // The last layer's output; x must stay valid until backward.
  std::span<const float> forward(std::span<const float> x, size_t rows, const Hooks* hooks = nullptr);
  // From dL/dy: every layer's gradients, and dL/dx into dx unless it is
  // empty; last layer first.
  void backward(std::span<const float> dy, std::span<float> dx, size_t rows, const Hooks* hooks = nullptr);
  // The same in two passes, for zero-bubble pipelines: every layer's
  // Layer::backwardInput (dL/dx into dx), last first, then, later, every
  // layer's Layer::backwardWeights, last first. Each layer's dL/dy is kept
  // between them, and dy must stay valid too. The hooks of either pass
  // are called around each layer's half; afterBackward in the second says
  // the layer's gradients are written.
  void backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows, const Hooks* hooks = nullptr);
  void backwardWeights(const Hooks* hooks = nullptr);
  // Frees every layer's output and what each kept for backward
  // (Layer::releaseActivations).
  void releaseActivations();

 private:
  MemoryAccount& account_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Slice> slices_;
  size_t paramCount_ = 0;
  std::vector<Tracked<float>> outputs_;  // each layer's output
  std::vector<size_t> rows_;             // each layer's input rows in the last forward
  std::vector<Tracked<float>> grad_;     // two, ping-pong: dL/d(layer input)
  std::vector<Tracked<float>> kept_;     // backwardInput: dL/d(input) of layers 1.., kept for backwardWeights

  // The rows each layer saw in the last forward.
  void backwardRows(size_t rows);
};

}  // namespace loom::train
