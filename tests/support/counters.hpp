// A count of how this process's calls ran (loomGetCounter, loom.h): the
// tests' proof of the path a call took, where its result is the same on
// every path. Header-only, so that programs linked with libloom.so (and not
// the test support library) read the library's own counts.
#pragma once

#include <loom/loom.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace loom::test {

// The counter `name`; a name loomGetCounter refuses ends the test program,
// as a counter that always read 0 would prove nothing.
inline uint64_t counter(const char* name) {
  uint64_t value = 0;
  if (loomGetCounter(name, &value) != loomSuccess) {
    std::fprintf(stderr, "loomGetCounter(\"%s\"): %s\n", name, loomGetLastError(nullptr));
    std::abort();
  }
  return value;
}

}  // namespace loom::test
