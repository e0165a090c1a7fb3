// Softmax cross-entropy over `classes` logits per row, averaged over the
// rows: the loss head of both sample models. Its backward gives dL/dlogits =
// (softmax - onehot) / rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "training/layers/tensor_group.hpp"

namespace loom::train {

// The mean loss over `rows` rows; writes dL/dlogits into dlogits (same shape).
// Targets out of [0, classes) throw std::invalid_argument.
double crossEntropy(std::span<const float> logits, std::span<const int32_t> targets, size_t rows, size_t classes,
                    std::span<float> dlogits);

// Megatron's vocabulary-parallel cross-entropy: `logits` are this rank's
// share of the classes (shareOf(classes, group)), as a column-parallel
// head leaves them. Instead of gathering the logits, the ranks all-reduce
// each row's maximum, then its sum of exponentials and its target's logit:
// loss = log(sum) - (target - max). dlogits gets this rank's share of
// (softmax - onehot) / rows; every rank returns the same mean loss.
double crossEntropy(std::span<const float> logits, std::span<const int32_t> targets, size_t rows, size_t classes,
                    const TensorGroup& group, std::span<float> dlogits);

// How many rows' largest logit is the target's.
size_t correct(std::span<const float> logits, std::span<const int32_t> targets, size_t rows, size_t classes);

}  // namespace loom::train
