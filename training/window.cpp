#include "training/window.hpp"

#include <algorithm>

namespace loom::train {

void Bf16Window::reserve(size_t largest) {
  params_.resize(std::max(params_.size(), largest));
  grads_.resize(std::max(grads_.size(), largest));
}

void Bf16Window::enter(Layer& layer, const Bf16Home& home) {
  const size_t count = home.params.size();
  const auto params = params_.span().first(count);
  widen(home.params, params);
  layer.bind(params, grads_.span().first(count));
}

void Bf16Window::storeParams(const Bf16Home& home) { narrow(params_.span().first(home.params.size()), home.params); }

void Bf16Window::storeGrads(const Bf16Home& home) { narrow(grads_.span().first(home.grads.size()), home.grads); }

Sequence::Hooks Bf16Window::around(Sequence& layers, std::span<const Bf16Home> homes, const Sequence::Hooks* inner,
                                   Pass pass) {
  using LayerDone = Sequence::LayerDone;
  Sequence::Hooks out;
  const auto call = [inner](LayerDone Sequence::Hooks::*which, size_t i) {
    if (inner != nullptr && inner->*which) (inner->*which)(i);
  };
  if (pass == Pass::Forward) {
    out.beforeForward = [this, &layers, homes, call](size_t i) {
      call(&Sequence::Hooks::beforeForward, i);  // ZeRO-3 gathers the layer's home first
      enter(layers.layer(i), homes[i]);
    };
    out.afterForward = [call](size_t i) { call(&Sequence::Hooks::afterForward, i); };
    return out;
  }
  out.beforeBackward = [this, &layers, homes, call](size_t i) {
    call(&Sequence::Hooks::beforeBackward, i);
    enter(layers.layer(i), homes[i]);
  };
  out.afterBackward = [this, homes, call, pass](size_t i) {
    if (pass == Pass::Backward) storeGrads(homes[i]);
    call(&Sequence::Hooks::afterBackward, i);
  };
  return out;
}

}  // namespace loom::train
