#include "tests/support/llmc_files.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>

namespace loom::test {
namespace {

// llm.c's header: these first, the rest of its 256 uint32 zero.
std::vector<unsigned char> header(std::initializer_list<uint32_t> first) {
  std::vector<unsigned char> bytes(1024, 0);
  size_t at = 0;
  for (const uint32_t v : first) {
    for (size_t b = 0; b < 4; ++b) bytes[at + b] = static_cast<unsigned char>(v >> (8 * b));
    at += 4;
  }
  return bytes;
}

void write(const std::string& path, const std::vector<unsigned char>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size()) << path;
  std::fclose(f);
}

}  // namespace

void writeLlmcTokenFile(const std::string& path, const std::vector<uint32_t>& ids, uint32_t magic, uint32_t version,
                        size_t width, int64_t count) {
  std::vector<unsigned char> bytes =
      header({magic, version, static_cast<uint32_t>(count < 0 ? static_cast<int64_t>(ids.size()) : count)});
  for (const uint32_t id : ids) {
    for (size_t b = 0; b < width; ++b) bytes.push_back(static_cast<unsigned char>(id >> (8 * b)));
  }
  write(path, bytes);
}

void writeLlmcTokenizer(const std::string& path, const std::vector<std::string>& tokens, uint32_t magic,
                        uint32_t version, uint32_t endOfText, int64_t vocabulary) {
  std::vector<unsigned char> bytes = header(
      {magic, version, static_cast<uint32_t>(vocabulary < 0 ? static_cast<int64_t>(tokens.size()) : vocabulary), endOfText});
  for (const std::string& t : tokens) {
    bytes.push_back(static_cast<unsigned char>(t.size()));
    bytes.insert(bytes.end(), t.begin(), t.end());
  }
  write(path, bytes);
}

}  // namespace loom::test
