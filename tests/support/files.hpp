// Files the tests read back: dumps, reports, logs.
#pragma once

#include <string>

namespace loom::test {

// The whole file, or "" when it cannot be read.
std::string readFile(const std::string& path);

}  // namespace loom::test
