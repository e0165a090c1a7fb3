#include "training/data/tokenizer.hpp"

#include <stdexcept>

#include "training/data/llmc_format.hpp"

namespace loom::train {
namespace {

constexpr uint32_t kGpt2Vocabulary = 50257;  // version 1's, whose end of text is its last token

}  // namespace

Tokenizer::Tokenizer(const std::string& path) {
  std::ifstream file;
  const auto header = readLlmcHeader(file, path);
  const uint32_t magic = header[0];
  const uint32_t version = header[1];
  const uint32_t vocabulary = header[2];
  if (magic != kMagic || (version != 1 && version != 2)) {
    throw std::runtime_error(path + ": not a tokenizer file of llm.c's (magic " + std::to_string(magic) + " version " +
                             std::to_string(version) + "; llm.c's is 20240328 version 1 or 2)");
  }
  if (version == 1 && vocabulary != kGpt2Vocabulary) {
    throw std::runtime_error(path + ": version 1 is GPT-2's 50257 tokens, but its header says " +
                             std::to_string(vocabulary));
  }
  const uint32_t endOfText = version == 1 ? kGpt2Vocabulary - 1 : header[3];
  if (endOfText >= vocabulary) {
    throw std::runtime_error(path + ": its end-of-text token " + std::to_string(endOfText) + " is past its " +
                             std::to_string(vocabulary) + " tokens");
  }
  endOfText_ = static_cast<int32_t>(endOfText);
  tokens_.reserve(vocabulary);
  for (uint32_t i = 0; i < vocabulary; ++i) {
    char length = 0;
    if (!file.get(length)) {
      throw std::runtime_error(path + ": its header counts " + std::to_string(vocabulary) + " tokens, but the file ends after " +
                               std::to_string(i));
    }
    if (length == 0) throw std::runtime_error(path + ": token " + std::to_string(i) + " has no bytes");
    std::string bytes(static_cast<unsigned char>(length), '\0');
    if (!file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
      throw std::runtime_error(path + ": the file ends inside token " + std::to_string(i));
    }
    tokens_.push_back(std::move(bytes));
  }
}

std::string Tokenizer::decode(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return "<|" + std::to_string(id) + "|>";
  return tokens_[static_cast<size_t>(id)];
}

}  // namespace loom::train
