#include "training/math/bias.hpp"

#include "training/math/vector_loops.hpp"

namespace loom::train {

LOOM_VECTOR_LOOPS void addBias(std::span<float> y, const float* b, size_t rows, size_t out) {
  for (size_t r = 0; r < rows; ++r) {
    float* row = y.data() + r * out;
    for (size_t j = 0; j < out; ++j) row[j] += b[j];
  }
}

LOOM_VECTOR_LOOPS void biasGradient(std::span<const float> dy, float* db, size_t rows, size_t out) {
  for (size_t j = 0; j < out; ++j) db[j] = 0.0f;
  for (size_t r = 0; r < rows; ++r) {
    const float* row = dy.data() + r * out;
    for (size_t j = 0; j < out; ++j) db[j] += row[j];
  }
}

}  // namespace loom::train
