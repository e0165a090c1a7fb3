// Softmax cross-entropy over `classes` logits per row, averaged over the
// rows: the loss head of both sample models. Its backward gives dL/dlogits =
// (softmax - onehot) / rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace loom::train {

// The mean loss over `rows` rows; writes dL/dlogits into dlogits (same shape).
// Targets out of [0, classes) throw std::invalid_argument.
double crossEntropy(std::span<const float> logits, std::span<const int32_t> targets, size_t rows, size_t classes,
                    std::span<float> dlogits);

// How many rows' largest logit is the target's.
size_t correct(std::span<const float> logits, std::span<const int32_t> targets, size_t rows, size_t classes);

}  // namespace loom::train
