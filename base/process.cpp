#include "base/process.hpp"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace loom {

bool processHasExited(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;  // no /proc to ask: it runs, as far as this process knows
  char stat[512] = {};
  const size_t got = std::fread(stat, 1, sizeof stat - 1, f);
  std::fclose(f);
  // "pid (name) S ...": the name may hold spaces and parentheses, so the
  // state is the letter after the last ')'.
  const char* close = std::strrchr(stat, ')');
  if (got == 0 || close == nullptr || close[1] != ' ') return false;
  return close[2] == 'Z' || close[2] == 'X';
}

}  // namespace loom
