// loom-info: what this build of Loom is and what it sees on this machine.
//   loom-info                 version, CUDA, interfaces
//   loom-info --env-markdown  the table of LOOM_* variables (docs/configuration.md's copy is generated from it)
#include <loom/loom.h>

#include <cstdio>
#include <cstring>

#include "base/device/cuda.hpp"
#include "base/env.hpp"
#include "base/net/interfaces.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--env-markdown") == 0) {
    std::fputs(loom::env::markdownTable().c_str(), stdout);
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "usage: loom-info [--env-markdown]\n");
    return 2;
  }
  std::printf("loom %d.%d.%d\n", LOOM_MAJOR, LOOM_MINOR, LOOM_PATCH);
  std::printf("cuda: %s, %d device(s) visible\n", loom::cuda::compiledWithCuda() ? "built with CUDA" : "built without CUDA",
              loom::cuda::deviceCount());
  auto all = loom::net::listInterfaces();
  try {
    auto chosen = loom::net::selectInterfaces(loom::env::get("LOOM_SOCKET_IFNAME"), all);
    std::printf("bootstrap interface: %s %s\n", chosen.front().name.c_str(), chosen.front().address.toString().c_str());
  } catch (const std::exception& e) {
    std::printf("bootstrap interface: none (%s)\n", e.what());
  }
  for (const auto& i : all) std::printf("  interface %-10s %s%s\n", i.name.c_str(), i.address.toString().c_str(), i.loopback ? " (loopback)" : "");
  return 0;
}
