// A model: a sequence of layers over one flat parameter buffer and one flat
// gradient buffer, both in layer order. Forward runs the layers in order,
// backward in reverse, telling the caller as each layer's gradients are
// written, which is when data parallelism may start reducing them. A
// layer may itself hold a sequence (a residual branch): its parameters are
// one slice, its sublayers' one after another inside it.
//
// In bf16 (mixed precision) the flat buffers hold bf16; layers compute in
// float32 on a window as large as the largest top-level layer (window.hpp).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "training/layers/layer.hpp"
#include "training/math/bf16.hpp"
#include "training/memory.hpp"
#include "training/sequence.hpp"
#include "training/window.hpp"

namespace loom::train {

enum class Precision { Fp32, Bf16 };
// "fp32", "bf16"; std::invalid_argument naming the value otherwise.
Precision parsePrecision(const std::string& name);
const char* precisionName(Precision precision);

class Model {
 public:
  using Slice = Sequence::Slice;
  using LayerDone = Sequence::LayerDone;
  using Hooks = Sequence::Hooks;

  explicit Model(MemoryAccount& account, Precision precision = Precision::Fp32);
  MemoryAccount& account() const { return sequence_.account(); }
  Precision precision() const { return precision_; }

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
  void releaseGradients();
  // Binds layers first..last to `params` and `grads`, which hold their
  // slices one after another (the flat layout from the first's offset).
  // fp32 binds the layers; bf16 makes them the layers' home, which the
  // window is filled from and emptied into.
  void bindLayers(size_t first, size_t last, std::span<float> params, std::span<float> grads);
  void bindLayers(size_t first, size_t last, std::span<bf16> params, std::span<bf16> grads);
  // Layer i draws from its own stream of the seed, Random(seed * P + i);
  // then every tie's second copy is made the first's.
  void init(uint64_t seed);

  // Weight tying (GPT-2's embedding and head): parameters [b, b + count)
  // are the same as [a, a + count) and stay so. The flat buffers hold both
  // copies; a trainer gives both the sum of their gradients
  // (sumTiedGradients), so their updates are the same, and counts the
  // second copy out of the gradient norm.
  struct Tie {
    size_t a;
    size_t b;
    size_t count;
  };
  void tie(size_t a, size_t b, size_t count);
  const std::vector<Tie>& ties() const { return ties_; }

  // Moves layers first..last into a sequence of their own (a pipeline
  // chunk's copy of them, bound to its own buffers); the model keeps the
  // others and its layout, and is built for nothing else.
  Sequence takeLayers(size_t first, size_t last) { return sequence_.take(first, last); }

  size_t paramCount() const { return sequence_.paramCount(); }
  // The flat buffers of the model's precision, T float (fp32) or bf16;
  // empty in the other precision.
  template <class T>
  std::span<T> params();
  template <class T>
  std::span<T> grads();
  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  // Every parameter as float32, in model order (bf16 widened): what the
  // final checksum is of.
  std::vector<float> paramsAsFloat() const;
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

  Precision precision_;
  Sequence sequence_;
  Tracked<float> params_;
  Tracked<float> grads_;
  Tracked<bf16> params16_;
  Tracked<bf16> grads16_;
  Bf16Window window_;            // bf16: one top-level layer's parameters, widened
  std::vector<Bf16Home> homes_;  // bf16: each top-level layer's slices
  Tracked<float> input_;  // a copy of the last forward's x, which backward still reads
  std::vector<Tie> ties_;
};

// a[i] = b[i] = a[i] + b[i]: two tied copies' gradients, each given their sum.
template <class T>
void sumTiedCopies(std::span<T> a, std::span<T> b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = fromFloat<T>(toFloat(a[i]) + toFloat(b[i]));
}

// Every tie's two copies in `grads`, summed.
template <class T>
void sumTiedGradients(const std::vector<Model::Tie>& ties, std::span<T> grads) {
  for (const Model::Tie& t : ties) sumTiedCopies(grads.subspan(t.a, t.count), grads.subspan(t.b, t.count));
}

template <>
inline std::span<float> Model::params<float>() { return params_.span(); }
template <>
inline std::span<bf16> Model::params<bf16>() { return params16_.span(); }
template <>
inline std::span<float> Model::grads<float>() { return grads_.span(); }
template <>
inline std::span<bf16> Model::grads<bf16>() { return grads16_.span(); }

}  // namespace loom::train
