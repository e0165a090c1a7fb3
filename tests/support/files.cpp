#include "tests/support/files.hpp"

#include <fstream>
#include <sstream>

namespace loom::test {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace loom::test
