// llm.c's GPT-2 tokenizer file (gpt2_tokenizer.bin, which its train_gpt2.py
// writes beside the token files), for printing samples as text: a header of
// 256 uint32 (magic 20240328, version, vocabulary size and, from version 2,
// the end-of-text id; version 1 is GPT-2's 50257 tokens, end of text 50256),
// then every token's bytes, each after a length byte of at least 1. Decoding
// only: GPT-2's byte-level tokens are pieces of UTF-8 that join into text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::train {

class Tokenizer {
 public:
  inline static constexpr uint32_t kMagic = 20240328;

  // Throws std::runtime_error naming the file and what is wrong with it.
  explicit Tokenizer(const std::string& path);

  size_t size() const { return tokens_.size(); }
  int32_t endOfText() const { return endOfText_; }
  // Token `id`'s bytes; an id it does not hold (past its vocabulary: llm.c
  // pads GPT-2's 50257 to 50304, and an untrained model samples those too)
  // as "<|id|>".
  std::string decode(int32_t id) const;

 private:
  std::vector<std::string> tokens_;
  int32_t endOfText_ = 0;
};

}  // namespace loom::train
