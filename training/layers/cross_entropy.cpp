#include "training/layers/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "training/math/exp.hpp"
#include "training/math/vector_loops.hpp"

namespace loom::train {

LOOM_VECTOR_LOOPS double crossEntropy(std::span<const float> logits, std::span<const int32_t> targets, size_t rows,
                                      size_t classes, std::span<float> dlogits) {
  double loss = 0;
  const float scale = 1.0f / static_cast<float>(rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * classes;
    float* dz = dlogits.data() + r * classes;
    const int32_t target = targets[r];
    if (target < 0 || static_cast<size_t>(target) >= classes) {
      throw std::invalid_argument("target " + std::to_string(target) + " of row " + std::to_string(r) +
                                  " is not one of " + std::to_string(classes) + " classes");
    }
    const float max = *std::max_element(z, z + classes);
    for (size_t j = 0; j < classes; ++j) dz[j] = expFloat(z[j] - max);  // vectorizes
    float sum = 0;
    for (size_t j = 0; j < classes; ++j) sum += dz[j];  // in order
    const float inverse = 1.0f / sum;
    for (size_t j = 0; j < classes; ++j) dz[j] *= inverse;  // the softmax
    loss -= std::log(static_cast<double>(dz[static_cast<size_t>(target)]));
    dz[static_cast<size_t>(target)] -= 1.0f;
    for (size_t j = 0; j < classes; ++j) dz[j] *= scale;
  }
  return loss / static_cast<double>(rows);
}

LOOM_VECTOR_LOOPS double crossEntropy(std::span<const float> logits, std::span<const int32_t> targets, size_t rows,
                                      size_t classes, const TensorGroup& group, std::span<float> dlogits) {
  const Share share = shareOf(classes, group.size, group.rank);
  const size_t n = share.count;
  std::vector<float> max(rows), sums(2 * rows);  // sums: each row's sum of exponentials, then its target's logit
  for (size_t r = 0; r < rows; ++r) {
    const int32_t target = targets[r];
    if (target < 0 || static_cast<size_t>(target) >= classes) {
      throw std::invalid_argument("target " + std::to_string(target) + " of row " + std::to_string(r) +
                                  " is not one of " + std::to_string(classes) + " classes");
    }
    const float* z = logits.data() + r * n;
    max[r] = n == 0 ? -INFINITY : *std::max_element(z, z + n);
  }
  group.allReduce(std::span(max), loomMax);
  for (size_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * n;
    float* dz = dlogits.data() + r * n;
    for (size_t j = 0; j < n; ++j) dz[j] = expFloat(z[j] - max[r]);  // vectorizes
    float sum = 0;
    for (size_t j = 0; j < n; ++j) sum += dz[j];  // in order
    sums[r] = sum;
    const auto target = static_cast<size_t>(targets[r]);
    sums[rows + r] = target >= share.first && target < share.first + n ? z[target - share.first] : 0.0f;
  }
  group.allReduce(std::span(sums));
  double loss = 0;
  const float scale = 1.0f / static_cast<float>(rows);
  for (size_t r = 0; r < rows; ++r) {
    loss += std::log(static_cast<double>(sums[r])) - (static_cast<double>(sums[rows + r]) - static_cast<double>(max[r]));
    float* dz = dlogits.data() + r * n;
    const float inverse = 1.0f / sums[r];
    const auto target = static_cast<size_t>(targets[r]);
    for (size_t j = 0; j < n; ++j) {
      dz[j] *= inverse;
      if (share.first + j == target) dz[j] -= 1.0f;
      dz[j] *= scale;
    }
  }
  return loss / static_cast<double>(rows);
}

size_t correct(std::span<const float> logits, std::span<const int32_t> targets, size_t rows, size_t classes) {
  size_t hits = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * classes;
    hits += static_cast<size_t>(std::max_element(z, z + classes) - z) == static_cast<size_t>(targets[r]);
  }
  return hits;
}

}  // namespace loom::train
