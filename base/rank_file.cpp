#include "base/rank_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/error.hpp"

namespace loom {

std::optional<std::string> rankFilePath(const std::string& pattern, int rank, Writers writers) {
  std::string path = pattern;
  const size_t at = path.find("%r");
  if (at != std::string::npos) return path.replace(at, 2, std::to_string(rank));
  if (writers == Writers::EveryRank) return path + "." + std::to_string(rank);
  if (rank == 0) return path;
  return std::nullopt;
}

void writeTextFile(const std::string& path, const std::string& text, const char* variable) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) throw Error(loomSystemError, std::string(variable) + ": cannot write '" + path + "': " + std::strerror(errno));
}

}  // namespace loom
