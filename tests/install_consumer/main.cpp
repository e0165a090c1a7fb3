// A C++ program using the installed <loom/loom.hpp>: RAII communicators and spans.
#include <loom/loom.hpp>

#include <cstdio>
#include <vector>

int main() {
  auto comms = loom::Comm::all(1);
  std::vector<float> x{1.0f, 2.0f};
  comms[0].allReduce(std::span(x));
  std::printf("loom ok %d rank (C++: %g)\n", comms[0].size(), static_cast<double>(x[1]));
  return x[1] == 2.0f ? 0 : 1;
}
