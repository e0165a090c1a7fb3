#include "training/data/token_file.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "training/data/llmc_format.hpp"

namespace loom::train {

TokenFile::TokenFile(const std::string& path, Split split, size_t context, size_t vocab) : context_(context) {
  if (context == 0) throw std::invalid_argument("--seq must be at least 1");
  std::ifstream file;
  const auto header = readLlmcHeader(file, path);
  const auto headerInt = [&](size_t i) { return static_cast<int32_t>(header[i]); };
  const int32_t magic = headerInt(0);
  const int32_t version = headerInt(1);
  size_t width = 0;
  if (magic == kGpt2Magic && version == 1) {
    width = 2;
  } else if (magic == kLlama3Magic && version == 7) {
    width = 4;
  } else {
    throw std::runtime_error(path + ": not a token file of llm.c's (magic " + std::to_string(magic) + " version " +
                             std::to_string(version) + "; GPT-2's is 20240520 version 1, LLaMA 3's 20240801 version 7)");
  }
  if (headerInt(2) < 0) throw std::runtime_error(path + ": a negative token count in its header");
  const auto count = static_cast<size_t>(headerInt(2));
  std::vector<unsigned char> bytes(count * width);
  file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (static_cast<size_t>(file.gcount()) != bytes.size()) {
    throw std::runtime_error(path + ": its header counts " + std::to_string(count) + " tokens of " +
                             std::to_string(width) + " bytes, but the file holds " +
                             std::to_string(static_cast<size_t>(file.gcount()) / width) + " after the header");
  }
  std::vector<int32_t> all(count);
  int32_t largest = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t id = width == 2 ? readLittle<uint16_t>(bytes.data() + 2 * i) : readLittle<uint32_t>(bytes.data() + 4 * i);
    if (id > static_cast<uint32_t>(INT32_MAX)) throw std::runtime_error(path + ": token " + std::to_string(i) + " is " + std::to_string(id));
    all[i] = static_cast<int32_t>(id);
    largest = std::max(largest, all[i]);
  }
  // Ids reach the embedding as float32, exact below 2^24 (LLaMA 3's 128256 is far below).
  if (largest >= (1 << 24)) {
    throw std::runtime_error(path + ": token id " + std::to_string(largest) + " is past 2^24, the ids a float32 holds");
  }
  // The vocabulary from the whole file, so that both splits agree on it.
  vocab_ = count == 0 ? 0 : static_cast<size_t>(largest) + 1;
  if (vocab != 0) {
    if (vocab < vocab_) {
      throw std::invalid_argument("--vocab " + std::to_string(vocab) + ": " + path + " holds token id " +
                                  std::to_string(largest));
    }
    vocab_ = vocab;
  }
  const size_t cut = count - count / 10;
  const size_t begin = split == Split::Validation ? cut : 0;
  const size_t end = split == Split::Train ? cut : count;
  tokens_.assign(all.begin() + static_cast<std::ptrdiff_t>(begin), all.begin() + static_cast<std::ptrdiff_t>(end));
  if (tokens_.size() <= context) {
    throw std::runtime_error(path + ": " + std::to_string(tokens_.size()) + " tokens" +
                             (split == Split::Whole ? "" : split == Split::Train ? " to train on" : " held out") +
                             ", not more than one window of " + std::to_string(context));
  }
}

void TokenFile::sample(size_t i, std::span<float> x, std::span<int32_t> labels) const {
  for (size_t t = 0; t < context_; ++t) {
    x[t] = static_cast<float>(tokens_[i + t]);
    labels[t] = tokens_[i + t + 1];
  }
}

}  // namespace loom::train
