// Text from a trained GPT, one token at a time (GPT-2's sampling loop): the
// last `context` tokens so far go in as one window, left-aligned; causal
// attention makes the logits at the last of them depend on those tokens
// alone, whatever fills the rest of the window; the next token is their
// argmax (greedy) or is drawn from their softmax, seeded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "training/model.hpp"

namespace loom::train {

// `count` tokens after `prompt` (at least one token); seed 0: greedy.
// std::invalid_argument for an empty prompt.
std::vector<int32_t> generate(Model& gpt, size_t context, const std::vector<int32_t>& prompt, size_t count,
                              uint64_t seed);

}  // namespace loom::train
