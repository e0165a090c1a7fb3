// The values of command-line flags, for every tool: a value that does not
// parse or lies outside its range prints "<tool>: bad value '<text>' for
// <flag>" and exits 2, as a tool's usage errors do.
#pragma once

#include <cstddef>

namespace loom::flags {

// The tool's name, for the messages ("loom-perf").
void setTool(const char* name);

[[noreturn]] void bad(const char* flag, const char* text);
// "8", "64K", "1.5M", "2G" (powers of 1024), at most 10^12.
size_t parseBytes(const char* flag, const char* text);
int parseInt(const char* flag, const char* text, int min, int max = 100000000);
double parseDouble(const char* flag, const char* text, double min, double max);

}  // namespace loom::flags
