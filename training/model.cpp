#include "training/model.hpp"

#include <algorithm>
#include <stdexcept>

namespace loom::train {

Model::Model(MemoryAccount& account)
    : account_(account),
      params_(account, Category::Parameters),
      grads_(account, Category::Gradients),
      input_(account, Category::Activations),
      gradIn_(account, Category::Activations),
      gradOut_(account, Category::Activations) {}

void Model::add(std::unique_ptr<Layer> layer) {
  if (!layers_.empty() && layers_.back()->outFeatures() != layer->inFeatures()) {
    throw std::invalid_argument(layer->name() + " takes " + std::to_string(layer->inFeatures()) + " features, but " +
                                layers_.back()->name() + " gives " + std::to_string(layers_.back()->outFeatures()));
  }
  layers_.push_back(std::move(layer));
}

void Model::build() {
  if (layers_.empty()) throw std::invalid_argument("a model needs at least one layer");
  size_t offset = 0;
  for (const auto& layer : layers_) {
    size_t count = 0;
    for (const auto& p : layer->params()) count += p.count;
    slices_.push_back({offset, count});
    offset += count;
  }
  params_.resize(offset);
  grads_.resize(offset);
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->bind(params_.span().subspan(slices_[i].offset, slices_[i].count),
                     grads_.span().subspan(slices_[i].offset, slices_[i].count));
    outputs_.emplace_back(account_, Category::Activations);
  }
}

void Model::init(uint64_t seed) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    Random random(seed * 0x100000001B3ull + i);
    layers_[i]->init(random);
  }
}

std::string Model::describe() const {
  std::string text;
  for (const auto& layer : layers_) {
    if (!text.empty()) text += ", ";
    text += layer->name();
    if (!layer->params().empty()) {
      text += "(" + std::to_string(layer->inFeatures()) + "x" + std::to_string(layer->outFeatures()) + ")";
    }
  }
  return text + ": " + std::to_string(paramCount()) + " parameters";
}

std::span<const float> Model::forward(std::span<const float> x, size_t rows) {
  if (x.size() != rows * inFeatures()) {
    throw std::invalid_argument("forward: " + std::to_string(x.size()) + " inputs for " + std::to_string(rows) +
                                " rows of " + std::to_string(inFeatures()));
  }
  input_.resize(x.size());
  std::copy(x.begin(), x.end(), input_.data());
  std::span<const float> in = input_.span();
  for (size_t i = 0; i < layers_.size(); ++i) {
    outputs_[i].resize(rows * layers_[i]->outFeatures());
    layers_[i]->forward(in, outputs_[i].span(), rows);
    in = outputs_[i].span();
  }
  return in;
}

void Model::backward(std::span<const float> dlogits, size_t rows, const LayerDone& done) {
  size_t widest = dlogits.size() / std::max<size_t>(rows, 1);
  for (const auto& layer : layers_) widest = std::max(widest, layer->inFeatures());
  gradIn_.resize(rows * widest);
  gradOut_.resize(rows * widest);
  std::copy(dlogits.begin(), dlogits.end(), gradOut_.data());
  Tracked<float>* dy = &gradOut_;
  Tracked<float>* dx = &gradIn_;
  for (size_t i = layers_.size(); i-- > 0;) {
    const size_t in = rows * layers_[i]->inFeatures();
    layers_[i]->backward(dy->span().first(rows * layers_[i]->outFeatures()),
                         i == 0 ? std::span<float>() : dx->span().first(in), rows);
    if (done) done(i);
    std::swap(dx, dy);
  }
}

}  // namespace loom::train
