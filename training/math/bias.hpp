// A linear layer's bias, forward and backward, for the dense layer and its
// tensor-parallel halves alike: row by row, so that every variant adds and
// sums in the same order.
#pragma once

#include <cstddef>
#include <span>

namespace loom::train {

// y (rows x out) += b, row by row.
void addBias(std::span<float> y, const float* b, size_t rows, size_t out);
// db (out) = the sum of dy's rows (rows x out), in row order.
void biasGradient(std::span<const float> dy, float* db, size_t rows, size_t out);

}  // namespace loom::train
