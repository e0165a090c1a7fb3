// Files that a LOOM_* variable names and several ranks may write (the
// topology dump, the flight recorder): "%r" in the name becomes the rank.
#pragma once

#include <optional>
#include <string>

namespace loom {

// Who writes a file named without %r: rank 0 alone, or every rank (each to
// its own, `pattern` + "." + rank).
enum class Writers { RankZero, EveryRank };

// Where rank `rank` writes for `pattern`: %r replaced by the rank. Without
// %r, as `writers` says; nullopt for a rank that writes nothing.
std::optional<std::string> rankFilePath(const std::string& pattern, int rank, Writers writers);

// Writes `text` to `path`; loomSystemError naming `variable` and the path if it cannot.
void writeTextFile(const std::string& path, const std::string& text, const char* variable);

}  // namespace loom
