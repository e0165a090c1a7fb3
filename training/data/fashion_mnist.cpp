#include "training/data/fashion_mnist.hpp"

#include <zlib.h>

#include <memory>
#include <stdexcept>

namespace loom::train {
namespace {

using GzFile = std::unique_ptr<gzFile_s, decltype(&gzclose)>;

// The IDX header's big-endian 32-bit words.
uint32_t readWord(gzFile file, const std::string& path) {
  unsigned char b[4];
  if (gzread(file, b, 4) != 4) throw std::runtime_error(path + ": truncated header");
  return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3];
}

// The payload of an IDX file of unsigned bytes with `dims` dimensions, at
// most `limit` items of `itemBytes` (after the first dimension, checked).
std::vector<uint8_t> readIdx(const std::string& path, uint32_t dims, size_t itemBytes, size_t limit) {
  GzFile file(gzopen(path.c_str(), "rb"), &gzclose);
  if (!file) throw std::runtime_error(path + ": cannot open (install Debian's dataset-fashion-mnist)");
  const uint32_t magic = readWord(file.get(), path);
  if (magic != (0x0800u | dims)) throw std::runtime_error(path + ": not an IDX file of bytes in " + std::to_string(dims) + " dimensions");
  size_t items = readWord(file.get(), path);
  size_t bytes = 1;
  for (uint32_t d = 1; d < dims; ++d) bytes *= readWord(file.get(), path);
  if (bytes != itemBytes) throw std::runtime_error(path + ": items of " + std::to_string(bytes) + " bytes, not " + std::to_string(itemBytes));
  if (limit != 0 && limit < items) items = limit;
  std::vector<uint8_t> data(items * itemBytes);
  const auto want = static_cast<int>(data.size());
  if (gzread(file.get(), data.data(), static_cast<unsigned>(data.size())) != want) {
    throw std::runtime_error(path + ": truncated data");
  }
  return data;
}

}  // namespace

FashionMnist::FashionMnist(const std::string& dir, Split split, size_t limit) {
  const std::string prefix = dir + "/" + (split == Split::Train ? "train" : "t10k");
  pixels_ = readIdx(prefix + "-images-idx3-ubyte.gz", 3, 28 * 28, limit);
  labels_ = readIdx(prefix + "-labels-idx1-ubyte.gz", 1, 1, limit);
  if (pixels_.size() != labels_.size() * 28 * 28) throw std::runtime_error(prefix + ": images and labels disagree in number");
}

void FashionMnist::sample(size_t i, std::span<float> x, std::span<int32_t> labels) const {
  const uint8_t* p = pixels_.data() + i * 28 * 28;
  for (size_t j = 0; j < 28 * 28; ++j) x[j] = static_cast<float>(p[j]) * (1.0f / 255.0f);
  labels[0] = labels_[i];
}

}  // namespace loom::train
