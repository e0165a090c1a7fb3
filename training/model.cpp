#include "training/model.hpp"

#include <algorithm>
#include <stdexcept>

namespace loom::train {

Precision parsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "bf16") return Precision::Bf16;
  throw std::invalid_argument("--precision " + name + ": not a precision (fp32, bf16)");
}

const char* precisionName(Precision precision) { return precision == Precision::Fp32 ? "fp32" : "bf16"; }

Model::Model(MemoryAccount& account, Precision precision)
    : precision_(precision),
      sequence_(account),
      params_(account, Category::Parameters),
      grads_(account, Category::Gradients),
      params16_(account, Category::Parameters),
      grads16_(account, Category::Gradients),
      window_(account),
      input_(account, Category::Activations) {}

void Model::build(bool allocate) {
  if (sequence_.layers() == 0) throw std::invalid_argument("a model needs at least one layer");
  if (allocate) this->allocate();
}

void Model::allocate() {
  if (precision_ == Precision::Fp32) {
    params_.resize(sequence_.paramCount());
    grads_.resize(sequence_.paramCount());
    sequence_.bind(params_.span(), grads_.span());
    return;
  }
  params16_.resize(sequence_.paramCount());
  grads16_.resize(sequence_.paramCount());
  size_t largest = 0;
  for (const Slice& slice : slices()) largest = std::max(largest, slice.count);
  window_.reserve(largest);
  bindLayers(0, sequence_.layers() - 1, params16_.span(), grads16_.span());
}

void Model::release() {
  params_.release();
  grads_.release();
  params16_.release();
  grads16_.release();
}

void Model::releaseGradients() {
  grads_.release();
  grads16_.release();
}

void Model::bindLayers(size_t first, size_t last, std::span<bf16> params, std::span<bf16> grads) {
  homes_.resize(sequence_.layers());
  const size_t base = slices()[first].offset;
  for (size_t i = first; i <= last; ++i) {
    const Slice& slice = slices()[i];
    homes_[i] = {params.subspan(slice.offset - base, slice.count),
                 grads.empty() ? std::span<bf16>() : grads.subspan(slice.offset - base, slice.count)};
  }
}

std::vector<float> Model::paramsAsFloat() const {
  if (precision_ == Precision::Fp32) return {params_.span().begin(), params_.span().end()};
  std::vector<float> out(params16_.size());
  widen(params16_.span(), out);
  return out;
}

void Model::bindLayers(size_t first, size_t last, std::span<float> params, std::span<float> grads) {
  const size_t base = slices()[first].offset;
  for (size_t i = first; i <= last; ++i) {
    const Slice& slice = slices()[i];
    sequence_.layer(i).bind(params.subspan(slice.offset - base, slice.count),
                            grads.subspan(slice.offset - base, slice.count));
  }
}

void Model::tie(size_t a, size_t b, size_t count) {
  if (a + count > b || b + count > paramCount() || (!ties_.empty() && b < ties_.back().b + ties_.back().count)) {
    throw std::invalid_argument("tie: [" + std::to_string(a) + ", +" + std::to_string(count) + ") and [" +
                                std::to_string(b) + ", +" + std::to_string(count) +
                                ") overlap, leave the model, or come before an earlier tie");
  }
  ties_.push_back({a, b, count});
}

void Model::init(uint64_t seed) {
  for (size_t i = 0; i < sequence_.layers(); ++i) {
    Random random(seed * 0x100000001B3ull + i);
    if (precision_ == Precision::Fp32) {
      sequence_.layer(i).init(random);
      continue;
    }
    // bf16: initialized in float32 in the window, rounded into the home.
    window_.enter(sequence_.layer(i), homes_[i]);
    sequence_.layer(i).init(random);
    window_.storeParams(homes_[i]);
  }
  for (const Tie& t : ties_) {
    if (precision_ == Precision::Fp32) {
      std::copy_n(params_.data() + t.a, t.count, params_.data() + t.b);
    } else {
      std::copy_n(params16_.data() + t.a, t.count, params16_.data() + t.b);
    }
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
  if (precision_ == Precision::Fp32) return sequence_.forward(input_.span(), rows, hooks);
  const Hooks around = window_.around(sequence_, homes_, hooks, Bf16Window::Pass::Forward);
  return sequence_.forward(input_.span(), rows, &around);
}

void Model::backward(std::span<const float> dlogits, size_t rows, const Hooks* hooks) {
  if (precision_ == Precision::Fp32) return sequence_.backward(dlogits, {}, rows, hooks);
  const Hooks around = window_.around(sequence_, homes_, hooks, Bf16Window::Pass::Backward);
  sequence_.backward(dlogits, {}, rows, &around);
}

}  // namespace loom::train
