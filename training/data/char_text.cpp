#include "training/data/char_text.hpp"

#include <zlib.h>

#include <array>
#include <memory>
#include <stdexcept>

namespace loom::train {

CharText::CharText(const std::string& path, Split split, size_t context) : context_(context) {
  if (context == 0) throw std::invalid_argument("--seq must be at least 1");
  std::unique_ptr<gzFile_s, decltype(&gzclose)> file(gzopen(path.c_str(), "rb"), &gzclose);
  if (!file) throw std::runtime_error(path + ": cannot open (install Debian's dict-devil)");
  std::vector<uint8_t> bytes;
  std::array<uint8_t, 1 << 16> chunk;
  for (int n; (n = gzread(file.get(), chunk.data(), chunk.size())) > 0;) bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  if (bytes.size() < 1000) throw std::runtime_error(path + ": too short to train on");
  std::array<int32_t, 256> id;
  id.fill(-1);
  for (uint8_t b : bytes) id[b] = 0;
  for (int b = 0; b < 256; ++b) {
    if (id[static_cast<size_t>(b)] == 0) {
      id[static_cast<size_t>(b)] = static_cast<int32_t>(vocab_.size());
      vocab_.push_back(static_cast<uint8_t>(b));
    }
  }
  const size_t cut = bytes.size() - bytes.size() / 10;
  const size_t begin = split == Split::Train ? 0 : cut;
  const size_t end = split == Split::Train ? cut : bytes.size();
  for (size_t i = begin; i < end; ++i) text_.push_back(id[bytes[i]]);
  if (text_.size() <= context) throw std::runtime_error(path + ": shorter than one window of " + std::to_string(context));
}

void CharText::sample(size_t i, std::span<float> x, std::span<int32_t> labels) const {
  for (size_t t = 0; t < context_; ++t) {
    x[t] = static_cast<float>(text_[i + t]);
    labels[t] = text_[i + t + 1];
  }
}

}  // namespace loom::train
