#include "training/sequence.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace loom::train {

void Sequence::add(std::unique_ptr<Layer> layer) {
  if (!layers_.empty() && layers_.back()->outFeatures() != layer->inFeatures()) {
    throw std::invalid_argument(layer->name() + " takes " + std::to_string(layer->inFeatures()) + " features, but " +
                                layers_.back()->name() + " gives " + std::to_string(layers_.back()->outFeatures()));
  }
  size_t count = 0;
  for (const auto& p : layer->params()) count += p.count;
  slices_.push_back({paramCount_, count});
  paramCount_ += count;
  layers_.push_back(std::move(layer));
  outputs_.emplace_back(account_, Category::Activations);
}

Sequence Sequence::take(size_t first, size_t last) {
  if (first > last || last >= layers_.size()) {
    throw std::invalid_argument("layers " + std::to_string(first) + ".." + std::to_string(last) + " of " +
                                std::to_string(layers_.size()));
  }
  Sequence out(account_);
  for (size_t i = first; i <= last; ++i) out.add(std::move(layers_[i]));
  return out;
}

void Sequence::bind(std::span<float> params, std::span<float> grads) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->bind(params.subspan(slices_[i].offset, slices_[i].count),
                     grads.subspan(slices_[i].offset, slices_[i].count));
  }
}

size_t Sequence::twinCount() const {
  size_t n = 0;
  for (const auto& layer : layers_) n += layer->twinCount();
  return n;
}

size_t Sequence::shareCount(int rank) const {
  size_t n = 0;
  for (const auto& layer : layers_) n += layer->shareCount(rank);
  return n;
}

void Sequence::fromTwin(std::span<const float> twin, std::span<float> mine) const {
  for (size_t i = 0, at = 0; i < layers_.size(); ++i) {
    layers_[i]->fromTwin(twin.subspan(at, layers_[i]->twinCount()), mine.subspan(slices_[i].offset, slices_[i].count));
    at += layers_[i]->twinCount();
  }
}

void Sequence::toTwin(int rank, std::span<const float> share, std::span<float> twin) const {
  for (size_t i = 0, at = 0, from = 0; i < layers_.size(); ++i) {
    const size_t n = layers_[i]->shareCount(rank);
    layers_[i]->toTwin(rank, share.subspan(from, n), twin.subspan(at, layers_[i]->twinCount()));
    at += layers_[i]->twinCount();
    from += n;
  }
}

void Sequence::markReplicated(std::span<uint8_t> mask) const {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->markReplicated(mask.subspan(slices_[i].offset, slices_[i].count));
}

void Sequence::init(Random& random) {
  for (auto& layer : layers_) layer->init(random);
}

size_t Sequence::outRows(size_t rows) const {
  for (const auto& layer : layers_) rows = layer->outRows(rows);
  return rows;
}

std::span<const float> Sequence::forward(std::span<const float> x, size_t rows, const Hooks* hooks) {
  std::span<const float> in = x;
  rows_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (hooks != nullptr && hooks->beforeForward) hooks->beforeForward(i);
    rows_[i] = rows;
    rows = layers_[i]->outRows(rows);
    outputs_[i].resize(rows * layers_[i]->outFeatures());
    layers_[i]->forward(in, outputs_[i].span(), rows_[i]);
    if (hooks != nullptr && hooks->afterForward) hooks->afterForward(i);
    in = outputs_[i].span();
  }
  return in;
}

void Sequence::releaseActivations() {
  for (auto& layer : layers_) layer->releaseActivations();
  for (auto& out : outputs_) out.release();
  for (auto& g : grad_) g.release();
  for (auto& g : kept_) g.release();
}

// Its own when there was no forward, as in the tests.
void Sequence::backwardRows(size_t rows) {
  if (rows_.size() != layers_.size() || rows_.front() != rows) {
    rows_.assign(layers_.size(), rows);
    for (size_t i = 1; i < layers_.size(); ++i) rows_[i] = layers_[i - 1]->outRows(rows_[i - 1]);
  }
}

void Sequence::backward(std::span<const float> dy, std::span<float> dx, size_t rows, const Hooks* hooks) {
  if (grad_.empty()) {
    grad_.emplace_back(account_, Category::Activations);
    grad_.emplace_back(account_, Category::Activations);
  }
  backwardRows(rows);
  size_t widest = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    widest = std::max({widest, rows_[i] * layers_[i]->inFeatures(),
                       layers_[i]->outRows(rows_[i]) * layers_[i]->outFeatures()});
  }
  for (auto& g : grad_) g.resize(widest);
  std::span<const float> from = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    const size_t in = rows_[i] * layers_[i]->inFeatures();
    std::span<float> to = i == 0 ? dx : grad_[i % 2].span().first(in);
    if (hooks != nullptr && hooks->beforeBackward) hooks->beforeBackward(i);
    layers_[i]->backward(from, to, rows_[i]);
    if (hooks != nullptr && hooks->afterBackward) hooks->afterBackward(i);
    from = to;
  }
}

void Sequence::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows, const Hooks* hooks) {
  while (kept_.size() + 1 < layers_.size()) kept_.emplace_back(account_, Category::Activations);
  backwardRows(rows);
  std::span<const float> from = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    std::span<float> to = dx;
    if (i > 0) {
      kept_[i - 1].resize(rows_[i] * layers_[i]->inFeatures());
      to = kept_[i - 1].span();
    }
    if (hooks != nullptr && hooks->beforeBackward) hooks->beforeBackward(i);
    layers_[i]->backwardInput(from, to, rows_[i]);
    if (hooks != nullptr && hooks->afterBackward) hooks->afterBackward(i);
    from = to;
  }
}

void Sequence::backwardWeights(const Hooks* hooks) {
  for (size_t i = layers_.size(); i-- > 0;) {
    if (hooks != nullptr && hooks->beforeBackward) hooks->beforeBackward(i);
    layers_[i]->backwardWeights();
    if (hooks != nullptr && hooks->afterBackward) hooks->afterBackward(i);
  }
}

}  // namespace loom::train
