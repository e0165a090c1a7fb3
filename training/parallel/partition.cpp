#include "training/parallel/partition.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>

namespace loom::train {

std::vector<LayerRange> balanceLayers(std::span<const size_t> weights, size_t parts) {
  const size_t n = weights.size();
  if (parts == 0 || parts > n) {
    throw std::invalid_argument("the model's " + std::to_string(n) + " layers cannot make " + std::to_string(parts) +
                                " pipeline chunks of at least one layer each");
  }
  std::vector<size_t> prefix(n + 1);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  // heaviest[k][i]: the lightest heaviest range cutting layers 0..i-1 into
  // k ranges; cut[k][i]: where the last of them starts.
  std::vector<std::vector<size_t>> heaviest(parts + 1, std::vector<size_t>(n + 1, kNone));
  std::vector<std::vector<size_t>> cut(parts + 1, std::vector<size_t>(n + 1, 0));
  heaviest[0][0] = 0;
  for (size_t k = 1; k <= parts; ++k) {
    for (size_t i = k; i <= n; ++i) {
      for (size_t j = k - 1; j < i; ++j) {
        if (heaviest[k - 1][j] == kNone) continue;
        const size_t worst = std::max(heaviest[k - 1][j], prefix[i] - prefix[j]);
        if (worst < heaviest[k][i]) {
          heaviest[k][i] = worst;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<LayerRange> ranges(parts);
  for (size_t k = parts, i = n; k > 0; --k) {
    ranges[k - 1] = {cut[k][i], i - 1};
    i = cut[k][i];
  }
  return ranges;
}

std::vector<LayerRange> listedLayers(const std::string& text, size_t layers, size_t parts) {
  std::vector<LayerRange> ranges;
  size_t next = 0;
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    size_t count = 0;
    const auto [end, error] = std::from_chars(text.data() + at, text.data() + comma, count);
    if (error != std::errc() || end != text.data() + comma || count == 0) {
      throw std::invalid_argument("--stages " + text + ": expected positive layer counts separated by commas");
    }
    ranges.push_back({next, next + count - 1});
    next += count;
    at = comma + 1;
  }
  if (ranges.size() != parts || next != layers) {
    throw std::invalid_argument("--stages " + text + ": " + std::to_string(ranges.size()) + " chunks of " +
                                std::to_string(next) + " layers, the pipeline has " + std::to_string(parts) +
                                " chunks and the model " + std::to_string(layers) + " layers");
  }
  return ranges;
}

}  // namespace loom::train
