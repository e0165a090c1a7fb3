#include "training/models/generate.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/random.hpp"

namespace loom::train {

std::vector<int32_t> generate(Model& gpt, size_t context, const std::vector<int32_t>& prompt, size_t count,
                              uint64_t seed) {
  if (prompt.empty()) throw std::invalid_argument("generate: an empty prompt");
  const size_t vocab = gpt.outFeatures();
  std::vector<int32_t> tokens = prompt;
  std::vector<float> window(context);
  std::vector<double> weights(vocab);
  Random random(seed);
  for (size_t n = 0; n < count; ++n) {
    const size_t used = std::min(tokens.size(), context);
    std::fill(window.begin(), window.end(), 0.0f);
    for (size_t t = 0; t < used; ++t) window[t] = static_cast<float>(tokens[tokens.size() - used + t]);
    const auto logits = gpt.forward(window, context).subspan((used - 1) * vocab, vocab);
    const auto best = std::max_element(logits.begin(), logits.end());
    size_t next = static_cast<size_t>(best - logits.begin());
    if (seed != 0) {  // softmax, shifted by the largest logit, in double
      double total = 0;
      for (size_t v = 0; v < vocab; ++v) total += weights[v] = std::exp(static_cast<double>(logits[v] - *best));
      double u = static_cast<double>(random.next() >> 11) * 0x1.0p-53 * total;
      for (next = 0; next + 1 < vocab && u >= weights[next]; ++next) u -= weights[next];
    }
    tokens.push_back(static_cast<int32_t>(next));
  }
  return {tokens.begin() + static_cast<std::ptrdiff_t>(prompt.size()), tokens.end()};
}

}  // namespace loom::train
