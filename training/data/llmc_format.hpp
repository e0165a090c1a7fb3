// What llm.c's files (its token files, its tokenizer) share: a header of 256
// 32-bit integers, and little-endian numbers, as numpy writes them on x86.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace loom::train {

inline constexpr size_t kLlmcHeaderInts = 256;

// The integer of type T at p, whatever this host's byte order.
template <class T>
T readLittle(const unsigned char* p) {
  T v = 0;
  for (size_t b = 0; b < sizeof(T); ++b) v = static_cast<T>(v | static_cast<T>(static_cast<T>(p[b]) << (8 * b)));
  return v;
}

// Opens `path` into `file` and reads its header, leaving `file` after it.
// Throws std::runtime_error naming the file if it cannot be opened or is
// shorter than the header.
std::array<uint32_t, kLlmcHeaderInts> readLlmcHeader(std::ifstream& file, const std::string& path);

}  // namespace loom::train
