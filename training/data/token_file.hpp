// Pre-tokenized text in llm.c's format, for the GPT: a header of 256 int32
// (magic, version, token count; the rest zero), then the tokens, uint16 for
// GPT-2's tokenizer (magic 20240520, version 1) or uint32 for LLaMA 3's
// (magic 20240801, version 7), as llm.c's dev/data scripts write them
// (tinyshakespeare_train.bin, fineweb_train_000001.bin, ...). Sample i is
// the window of `context` tokens from token i, its labels the same window
// shifted by one token. The vocabulary is the largest id of the file plus
// one, or the one given (GPT-2's 50257 padded as llm.c pads it, say).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "training/data/dataset.hpp"

namespace loom::train {

class TokenFile final : public Dataset {
 public:
  // Whole: every token; Train and Validation: the first nine tenths and the
  // last tenth, for a file with no validation file of its own.
  enum class Split { Whole, Train, Validation };
  inline static constexpr int32_t kGpt2Magic = 20240520;
  inline static constexpr int32_t kLlama3Magic = 20240801;

  // Throws std::runtime_error naming the file and what is wrong with it (not
  // readable, not llm.c's format, a count its size does not hold, fewer tokens
  // than a window and its next), and std::invalid_argument for a `vocab`
  // (nonzero) that does not hold the file's largest id.
  TokenFile(const std::string& path, Split split, size_t context, size_t vocab = 0);

  size_t size() const override { return tokens_.size() - context_; }
  size_t rowsPerSample() const override { return context_; }
  size_t features() const override { return context_; }
  size_t classes() const override { return vocab_; }
  void sample(size_t i, std::span<float> x, std::span<int32_t> labels) const override;

 private:
  std::vector<int32_t> tokens_;
  size_t context_;
  size_t vocab_ = 0;
};

}  // namespace loom::train
