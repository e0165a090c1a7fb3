// Mixed precision's working window: layers compute in float32, while in
// bf16 a layer's parameters and gradients live in bf16 "homes". Before a
// layer's forward and backward its parameters are widened into the window
// and the layer bound to it; after its backward its gradients are narrowed
// out of it. The window is working memory (activations), one layer's worth,
// so a model's parameters and gradients cost 2 + 2 bytes per parameter.
// The model and the pipeline's chunks share this one mechanism.
#pragma once

#include <span>

#include "training/layers/layer.hpp"
#include "training/math/bf16.hpp"
#include "training/memory.hpp"
#include "training/sequence.hpp"

namespace loom::train {

// Where one layer's parameters and gradients live in bf16.
struct Bf16Home {
  std::span<bf16> params;
  std::span<bf16> grads;  // may be empty (a layer only run forward)
};

class Bf16Window {
 public:
  explicit Bf16Window(MemoryAccount& account)
      : params_(account, Category::Activations), grads_(account, Category::Activations) {}
  // Room for the largest layer's parameters.
  void reserve(size_t largest);
  // `layer` bound to the window, its parameters widened from home.
  void enter(Layer& layer, const Bf16Home& home);
  // The window's parameters narrowed into home (after an init in float32).
  void storeParams(const Bf16Home& home);
  // The window's gradients narrowed into home (after a backward).
  void storeGrads(const Bf16Home& home);
  // Which pass a set of hooks wraps: a backward's first half (Input,
  // Sequence::backwardInput) writes no gradients; a whole backward, or its
  // second half, does.
  enum class Pass { Forward, Input, Backward };
  // Hooks doing both around `inner`'s (which may be null), layer i of
  // `layers` living at homes[i]: enter before each forward (backward: before
  // each backward, and store the gradients after it unless the pass is Input).
  Sequence::Hooks around(Sequence& layers, std::span<const Bf16Home> homes, const Sequence::Hooks* inner,
                         Pass pass);

 private:
  Tracked<float> params_;
  Tracked<float> grads_;
};

}  // namespace loom::train
