#include "tools/flags/flags.hpp"

#include <cstdio>
#include <cstdlib>

namespace loom::flags {
namespace {

const char* tool = "loom";

}  // namespace

void setTool(const char* name) { tool = name; }

void bad(const char* flag, const char* text) {
  std::fprintf(stderr, "%s: bad value '%s' for %s\n", tool, text, flag);
  std::exit(2);
}

size_t parseBytes(const char* flag, const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  double unit = 1;
  if (*end == 'K' || *end == 'k') unit = 1024, ++end;
  else if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024, ++end;
  if (end == text || *end != '\0' || v < 0 || v * unit > 1e12) bad(flag, text);
  return static_cast<size_t>(v * unit);
}

int parseInt(const char* flag, const char* text, int min, int max) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > max) bad(flag, text);
  return static_cast<int>(v);
}

double parseDouble(const char* flag, const char* text, double min, double max) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= min && v <= max)) bad(flag, text);
  return v;
}

}  // namespace loom::flags
