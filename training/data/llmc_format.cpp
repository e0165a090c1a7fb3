#include "training/data/llmc_format.hpp"

#include <stdexcept>

namespace loom::train {

std::array<uint32_t, kLlmcHeaderInts> readLlmcHeader(std::ifstream& file, const std::string& path) {
  file.open(path, std::ios::binary);
  if (!file) throw std::runtime_error(path + ": cannot open");
  std::array<unsigned char, kLlmcHeaderInts * 4> bytes{};
  if (!file.read(reinterpret_cast<char*>(bytes.data()), bytes.size())) {
    throw std::runtime_error(path + ": shorter than llm.c's header of 256 int32");
  }
  std::array<uint32_t, kLlmcHeaderInts> header{};
  for (size_t i = 0; i < header.size(); ++i) header[i] = readLittle<uint32_t>(bytes.data() + 4 * i);
  return header;
}

}  // namespace loom::train
