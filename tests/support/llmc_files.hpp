// llm.c's files, written by the tests that read them: token files and
// tokenizers (training/data/token_file.hpp, tokenizer.hpp say the formats),
// little-endian, a header of 256 uint32 first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::test {

// A token file: the header (magic, version, `count` or, if negative, the
// number of ids) and each id in `width` bytes (2: GPT-2's, 4: LLaMA 3's).
void writeLlmcTokenFile(const std::string& path, const std::vector<uint32_t>& ids, uint32_t magic, uint32_t version,
                        size_t width, int64_t count = -1);

// A tokenizer file: the header (magic, version, `vocabulary` or, if negative,
// the number of tokens, end of text), then each token's length byte and bytes.
void writeLlmcTokenizer(const std::string& path, const std::vector<std::string>& tokens, uint32_t magic,
                        uint32_t version, uint32_t endOfText, int64_t vocabulary = -1);

}  // namespace loom::test
