// A model: a sequence of layers over one flat parameter buffer and one flat
// gradient buffer, both in layer order. Forward runs the layers in order,
// backward in reverse, telling the caller as each layer's gradients are
// written, which is when data parallelism may start reducing them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "training/layers/layer.hpp"
#include "training/memory.hpp"

namespace loom::train {

class Model {
 public:
  // Where one layer's parameters sit in the flat buffers.
  struct Slice {
    size_t offset;
    size_t count;
  };
  using LayerDone = std::function<void(size_t layer)>;

  explicit Model(MemoryAccount& account);

  void add(std::unique_ptr<Layer> layer);
  // Lays the parameters out (layer order), allocates parameters and
  // gradients, binds every layer to its slices. After the last add().
  void build();
  // Every layer draws from its own stream of the seed, in layer order.
  void init(uint64_t seed);

  size_t paramCount() const { return params_.size(); }
  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  const std::vector<Slice>& slices() const { return slices_; }
  size_t layers() const { return layers_.size(); }
  const Layer& layer(size_t i) const { return *layers_[i]; }
  size_t inFeatures() const { return layers_.front()->inFeatures(); }
  size_t outFeatures() const { return layers_.back()->outFeatures(); }
  // "linear(784x256), gelu, linear(256x10): 203530 parameters"
  std::string describe() const;

  // The logits (rows x outFeatures()) of x (rows x inFeatures()).
  std::span<const float> forward(std::span<const float> x, size_t rows);
  // From dL/dlogits: writes every parameter's gradient; calls done(i) as
  // layer i's are written (last layer first).
  void backward(std::span<const float> dlogits, size_t rows, const LayerDone& done = {});

 private:
  MemoryAccount& account_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Slice> slices_;
  Tracked<float> params_;
  Tracked<float> grads_;
  Tracked<float> input_;              // a copy of the last forward's x
  std::vector<Tracked<float>> outputs_;  // each layer's output
  Tracked<float> gradIn_;             // ping-pong dL/dx between layers
  Tracked<float> gradOut_;
};

}  // namespace loom::train
