#include "training/layers/residual.hpp"

#include <stdexcept>

namespace loom::train {

Residual::Residual(std::string name, Sequence branch, bool recompute)
    : name_(std::move(name)),
      branch_(std::move(branch)),
      recompute_(recompute),
      dxBranch_(branch_.account(), Category::Activations) {
  if (branch_.layers() == 0 || branch_.inFeatures() != branch_.outFeatures()) {
    throw std::invalid_argument(name_ + ": a residual branch must map its features to as many");
  }
}

std::vector<ParamSpec> Residual::params() const {
  std::vector<ParamSpec> out;
  for (size_t i = 0; i < branch_.layers(); ++i) {
    for (auto p : branch_.layer(i).params()) {
      p.name = branch_.layer(i).name() + "." + p.name;
      out.push_back(p);
    }
  }
  return out;
}

void Residual::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  const auto f = branch_.forward(x, rows);
  for (size_t i = 0; i < rows * inFeatures(); ++i) y[i] = x[i] + f[i];
  if (!recompute_) return;
  x_ = x;
  branch_.releaseActivations();
}

void Residual::backward(std::span<const float> dy, std::span<float> dx, size_t rows) {
  if (recompute_) branch_.forward(x_, rows);
  dxBranch_.resize(rows * inFeatures());
  branch_.backward(dy, dxBranch_.span(), rows);
  if (!dx.empty()) {
    for (size_t i = 0; i < rows * inFeatures(); ++i) dx[i] = dy[i] + dxBranch_[i];
  }
  if (recompute_) releaseActivations();
}

void Residual::backwardInput(std::span<const float> dy, std::span<float> dx, size_t rows) {
  if (recompute_) branch_.forward(x_, rows);
  dxBranch_.resize(rows * inFeatures());
  branch_.backwardInput(dy, dxBranch_.span(), rows);
  if (!dx.empty()) {
    for (size_t i = 0; i < rows * inFeatures(); ++i) dx[i] = dy[i] + dxBranch_[i];
  }
}

void Residual::backwardWeights() {
  branch_.backwardWeights();
  if (recompute_) releaseActivations();
}

}  // namespace loom::train
