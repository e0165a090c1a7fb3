// Fashion-MNIST (Xiao, Rasul, Vollgraf 2017), as Debian's
// dataset-fashion-mnist ships it: gzip'd IDX files of 28 x 28 grey images
// and labels in 10 classes, 60000 for training and 10000 for testing.
// Pixels become floats in [0, 1].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "training/data/dataset.hpp"

namespace loom::train {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

class FashionMnist final : public Dataset {
 public:
  enum class Split { Train, Test };
  // Reads the split from `dir`, at most `limit` samples (0: all). Throws
  // std::runtime_error naming the file on anything missing or malformed.
  FashionMnist(const std::string& dir, Split split, size_t limit = 0);

  size_t size() const override { return labels_.size(); }
  size_t features() const override { return 28 * 28; }
  size_t classes() const override { return 10; }
  void sample(size_t i, std::span<float> x, std::span<int32_t> labels) const override;

 private:
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
};

}  // namespace loom::train
