#include "training/math/bf16.hpp"

#include <stdexcept>
#include <string>

#include "training/math/vector_loops.hpp"

namespace loom::train {
namespace {

void sameLength(size_t a, size_t b, const char* what) {
  if (a != b) throw std::invalid_argument(std::string(what) + ": " + std::to_string(a) + " into " + std::to_string(b));
}

}  // namespace

LOOM_VECTOR_LOOPS void widen(std::span<const bf16> from, std::span<float> to) {
  sameLength(from.size(), to.size(), "widen");
  for (size_t i = 0; i < from.size(); ++i) to[i] = widen(from[i]);
}

LOOM_VECTOR_LOOPS void narrow(std::span<const float> from, std::span<bf16> to) {
  sameLength(from.size(), to.size(), "narrow");
  for (size_t i = 0; i < from.size(); ++i) to[i] = narrow(from[i]);
}

}  // namespace loom::train
