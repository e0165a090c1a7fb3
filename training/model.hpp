// A model: a sequence of layers over one flat parameter buffer and one flat
// gradient buffer, both in layer order. Forward runs the layers in order,
// backward in reverse, telling the caller as each layer's gradients are
// written, which is when data parallelism may start reducing them. A
// layer may itself hold a sequence (a residual branch): its parameters are
// one slice, its sublayers' one after another inside it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "training/layers/layer.hpp"
#include "training/memory.hpp"
#include "training/sequence.hpp"

namespace loom::train {

class Model {
 public:
  using Slice = Sequence::Slice;
  using LayerDone = Sequence::LayerDone;
  using Hooks = Sequence::Hooks;

  explicit Model(MemoryAccount& account);
  MemoryAccount& account() const { return sequence_.account(); }

  void add(std::unique_ptr<Layer> layer) { sequence_.add(std::move(layer)); }
  // Lays the layers out and, with `allocate`, allocates parameters and
  // gradients, one flat buffer each in layer order, and binds every layer
  // to its slices. After the last add(). Without it (ZeRO-3), the caller
  // binds layers to buffers of its own (bindLayers) before each use.
  void build(bool allocate = true);
  // Allocates the flat buffers and binds every layer to them (again).
  void allocate();
  // Frees them; layers must be bound elsewhere before the next use.
  void release();
  // Frees the gradients only (ZeRO-2): layers' gradients must be bound
  // elsewhere before the next backward.
  void releaseGradients() { grads_.release(); }
  // Binds layers first..last to `params` and `grads`, which hold their
  // slices one after another (the flat layout from the first's offset).
  void bindLayers(size_t first, size_t last, std::span<float> params, std::span<float> grads);
  // Layer i draws from its own stream of the seed, Random(seed * P + i).
  void init(uint64_t seed);

  size_t paramCount() const { return sequence_.paramCount(); }
  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  const std::vector<Slice>& slices() const { return sequence_.slices(); }
  size_t layers() const { return sequence_.layers(); }
  const Layer& layer(size_t i) const { return sequence_.layer(i); }
  size_t inFeatures() const { return sequence_.inFeatures(); }
  size_t outFeatures() const { return sequence_.outFeatures(); }
  // "linear(784x256), gelu, linear(256x10): 203530 parameters"
  std::string describe() const;

  // The logits (rows x outFeatures()) of x (rows x inFeatures()).
  std::span<const float> forward(std::span<const float> x, size_t rows, const Hooks* hooks = nullptr);
  // From dL/dlogits: writes every parameter's gradient, last layer first.
  void backward(std::span<const float> dlogits, size_t rows, const Hooks* hooks = nullptr);

 private:
  Sequence sequence_;
  Tracked<float> params_;
  Tracked<float> grads_;
  Tracked<float> input_;  // a copy of the last forward's x, which backward still reads
};

}  // namespace loom::train
