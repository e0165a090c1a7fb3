#include "training/model.hpp"

#include <algorithm>
#include <stdexcept>

namespace loom::train {

Model::Model(MemoryAccount& account)
    : sequence_(account),
      params_(account, Category::Parameters),
      grads_(account, Category::Gradients),
      input_(account, Category::Activations) {}

void Model::build(bool allocate) {
  if (sequence_.layers() == 0) throw std::invalid_argument("a model needs at least one layer");
  if (allocate) this->allocate();
}

void Model::allocate() {
  params_.resize(sequence_.paramCount());
  grads_.resize(sequence_.paramCount());
  sequence_.bind(params_.span(), grads_.span());
}

void Model::release() {
  params_.release();
  grads_.release();
}

void Model::bindLayers(size_t first, size_t last, std::span<float> params, std::span<float> grads) {
  const size_t base = slices()[first].offset;
  for (size_t i = first; i <= last; ++i) {
    const Slice& slice = slices()[i];
    sequence_.layer(i).bind(params.subspan(slice.offset - base, slice.count),
                            grads.subspan(slice.offset - base, slice.count));
  }
}

void Model::init(uint64_t seed) {
  for (size_t i = 0; i < sequence_.layers(); ++i) {
    Random random(seed * 0x100000001B3ull + i);
    sequence_.layer(i).init(random);
  }
}

std::string Model::describe() const {
  std::string text;
  for (size_t i = 0; i < sequence_.layers(); ++i) {
    const Layer& layer = sequence_.layer(i);
    if (!text.empty()) text += ", ";
    text += layer.name();
    if (!layer.params().empty()) {
      text += "(" + std::to_string(layer.inFeatures()) + "x" + std::to_string(layer.outFeatures()) + ")";
    }
  }
  return text + ": " + std::to_string(paramCount()) + " parameters";
}

std::span<const float> Model::forward(std::span<const float> x, size_t rows, const Hooks* hooks) {
  if (x.size() != rows * inFeatures()) {
    throw std::invalid_argument("forward: " + std::to_string(x.size()) + " inputs for " + std::to_string(rows) +
                                " rows of " + std::to_string(inFeatures()));
  }
  input_.resize(x.size());
  std::copy(x.begin(), x.end(), input_.data());
  return sequence_.forward(input_.span(), rows, hooks);
}

void Model::backward(std::span<const float> dlogits, size_t rows, const Hooks* hooks) {
  sequence_.backward(dlogits, {}, rows, hooks);
}

}  // namespace loom::train
