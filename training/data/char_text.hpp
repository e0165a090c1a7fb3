// A character-level text corpus for the tiny GPT: The Devil's Dictionary
// (Ambrose Bierce, 1911; Debian's dict-devil, a gzip-readable dictd file).
// The vocabulary is the set of bytes the text holds, in byte order; sample
// i is the window of `context` bytes from byte i (any offset: every window
// the text holds), whose labels are the same window shifted by one byte.
// The last tenth is held out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "training/data/dataset.hpp"

namespace loom::train {

inline constexpr const char* kDevilsDictionary = "/usr/share/dictd/devil.dict.dz";

class CharText final : public Dataset {
 public:
  enum class Split { Train, Validation };
  // Throws std::runtime_error naming the file when it cannot be read.
  CharText(const std::string& path, Split split, size_t context);

  size_t size() const override { return text_.size() - context_; }
  size_t rowsPerSample() const override { return context_; }
  size_t features() const override { return context_; }
  size_t classes() const override { return vocab_.size(); }
  void sample(size_t i, std::span<float> x, std::span<int32_t> labels) const override;
  const std::vector<uint8_t>& vocabulary() const { return vocab_; }

 private:
  std::vector<uint8_t> vocab_;  // id -> byte
  std::vector<int32_t> text_;   // ids
  size_t context_;
};

}  // namespace loom::train
