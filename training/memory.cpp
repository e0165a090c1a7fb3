#include "training/memory.hpp"

#include <algorithm>

namespace loom::train {

const char* categoryName(Category c) {
  constexpr const char* kNames[kCategories] = {"parameters", "gradients", "optimizer_state", "activations",
                                                "communication"};
  return kNames[static_cast<size_t>(c)];
}

void MemoryAccount::allocated(Category c, size_t bytes) {
  const auto i = static_cast<size_t>(c);
  current_[i] += bytes;
  peak_[i] = std::max(peak_[i], current_[i]);
  peakModelStates_ = std::max(peakModelStates_, modelStates());
}

void MemoryAccount::freed(Category c, size_t bytes) { current_[static_cast<size_t>(c)] -= bytes; }

void MemoryAccount::resetPeaks() {
  peak_ = current_;
  peakModelStates_ = modelStates();
}

size_t MemoryAccount::modelStates() const {
  return current(Category::Parameters) + current(Category::Gradients) + current(Category::OptimizerState);
}

}  // namespace loom::train
