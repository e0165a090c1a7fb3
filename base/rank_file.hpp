// Files that a LOOM_* variable names and several ranks may write (the
// topology dump, the flight recorder): "%r" in the name becomes the rank.
#pragma once

#include <optional>
#include <string>

namespace loom {

// Where rank `rank` writes for `pattern`: %r replaced by the rank. Without
// %r, rank 0 writes `pattern` itself and the others nothing (nullopt), or,
// when `everyRank`, each rank writes `pattern` + "." + rank.
std::optional<std::string> rankFilePath(const std::string& pattern, int rank, bool everyRank);

// Writes `text` to `path`; loomSystemError naming `variable` and the path if it cannot.
void writeTextFile(const std::string& path, const std::string& text, const char* variable);

}  // namespace loom
