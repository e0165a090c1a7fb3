// Where a pipeline cuts the model: its top-level layers in `parts`
// contiguous, non-empty ranges (one per model chunk), either balanced by
// parameter count (the heaviest range as light as it can be: the linear
// partition problem, solved exactly by dynamic programming) or as the user
// lists them (--stages: layers per chunk).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace loom::train {

struct LayerRange {
  size_t first;
  size_t last;  // inclusive
};

// std::invalid_argument when there are fewer layers than parts.
std::vector<LayerRange> balanceLayers(std::span<const size_t> weights, size_t parts);

// "3,5,3": std::invalid_argument naming --stages unless it lists `parts`
// positive counts that add up to `layers`.
std::vector<LayerRange> listedLayers(const std::string& text, size_t layers, size_t parts);

}  // namespace loom::train
