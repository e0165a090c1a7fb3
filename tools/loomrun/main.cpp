// loomrun -n N [--] program args...: N ranks of a program on this machine.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/launch/local_job.hpp"

namespace {

int usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: loomrun -n N [--no-prefix] [--] program [args...]\n"
               "  Starts N ranks of program on this machine with LOOM_RANK, LOOM_LOCAL_RANK,\n"
               "  LOOM_WORLD_SIZE and LOOM_STORE_ADDR set (for loomCommInitFromEnv), prefixes\n"
               "  each output line with [rank], ends every rank when one fails and exits with\n"
               "  that rank's status (128+signal if it was killed).\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  loom::launch::JobOptions options;
  options.nranks = 0;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return usage(0);
    if ((a == "-n" || a == "--np") && i + 1 < argc) {
      char* end = nullptr;
      long n = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 4096) {
        std::fprintf(stderr, "loomrun: -n needs a number of ranks in [1, 4096], not '%s'\n", argv[i]);
        return 2;
      }
      options.nranks = static_cast<int>(n);
    } else if (a == "--no-prefix") {
      options.prefixOutput = false;
    } else if (a == "--") {
      ++i;
      break;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "loomrun: unknown option %s\n", a.c_str());
      return usage(2);
    } else {
      break;
    }
  }
  if (options.nranks == 0 || i >= argc) return usage(2);
  for (; i < argc; ++i) options.argv.emplace_back(argv[i]);
  try {
    return loom::launch::runLocalJob(options).exitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loomrun: %s\n", e.what());
    return 2;
  }
}
