// loom-perf: Loom's collective benchmark, in the manner of nccl-tests.
// Until the collectives land (issue 4/5) it measures the one operation that
// exists, the out-of-band barrier, as the bootstrap smoke run.
#include <loom/loom.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/launch/local_job.hpp"

namespace {

struct Options {
  std::string collective;
  int np = 4;
  int iters = 200;
  int warmup = 20;
};

int usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: loom-perf COLLECTIVE [-N ranks] [-n iters] [-w warmup]\n"
               "  COLLECTIVE: barrier (the out-of-band bootstrap barrier). The data collectives\n"
               "  (all_reduce, all_gather, ...) are not implemented yet.\n"
               "  -N/--np  ranks to start on this machine when not under a launcher (default 4)\n"
               "  -n       timed iterations (default 200)\n"
               "  -w       warm-up iterations (default 20)\n");
  return status;
}

int parsePositive(const char* flag, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 1 || v > 100000000) {
    std::fprintf(stderr, "loom-perf: %s needs a positive number, not '%s'\n", flag, text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

#define CHECK(call)                                                                                         \
  do {                                                                                                      \
    loomResult_t r_ = (call);                                                                               \
    if (r_ != loomSuccess) {                                                                                \
      std::fprintf(stderr, "loom-perf: %s failed: %s (%s)\n", #call, loomGetErrorString(r_), loomGetLastError(nullptr)); \
      return 1;                                                                                             \
    }                                                                                                       \
  } while (0)

int runRank(const Options& o) {
  loomComm_t comm = nullptr;
  CHECK(loomCommInitFromEnv(&comm, nullptr));
  int rank = 0, size = 0, local = 0, localSize = 0;
  CHECK(loomCommUserRank(comm, &rank));
  CHECK(loomCommCount(comm, &size));
  CHECK(loomCommLocalRank(comm, &local));
  CHECK(loomCommLocalCount(comm, &localSize));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  if (rank == 0) {
    std::printf("# loom-perf %d.%d.%d: %s, %d ranks, %d iterations, %d warm-up\n", LOOM_MAJOR, LOOM_MINOR, LOOM_PATCH,
                o.collective.c_str(), size, o.iters, o.warmup);
  }
  for (int r = 0; r < size; ++r) {  // one line per rank, in rank order
    if (r == rank) {
      std::printf("#  rank %2d  host %s  pid %d  local rank %d of %d\n", rank, host, static_cast<int>(::getpid()),
                  local, localSize);
      std::fflush(stdout);
    }
    CHECK(loomCommBarrier(comm));
  }
  for (int i = 0; i < o.warmup; ++i) CHECK(loomCommBarrier(comm));
  std::vector<double> us;
  for (int i = 0; i < o.iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(loomCommBarrier(comm));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  if (rank == 0) {
    auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))]; };
    std::printf("#%12s %8s %12s %12s %12s\n", "collective", "ranks", "min(us)", "p50(us)", "p99(us)");
    std::printf(" %12s %8d %12.1f %12.1f %12.1f\n", o.collective.c_str(), size, us.front(), at(0.5), at(0.99));
  }
  CHECK(loomCommDestroy(comm));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc < 2) return usage(2);
  o.collective = argv[1];
  if (o.collective == "-h" || o.collective == "--help") return usage(0);
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-N" || a == "--np") && i + 1 < argc) o.np = parsePositive("-N", argv[++i]);
    else if (a == "-n" && i + 1 < argc) o.iters = parsePositive("-n", argv[++i]);
    else if (a == "-w" && i + 1 < argc) o.warmup = parsePositive("-w", argv[++i]);
    else return usage(2);
  }
  if (o.collective != "barrier") {
    std::fprintf(stderr, "loom-perf: collective '%s' is not implemented yet; only 'barrier' is\n", o.collective.c_str());
    return 2;
  }
  if (loom::launch::launchedAsRank()) return runRank(o);
  return loom::launch::relaunchAsLocalJob(o.np, argc, argv);  // started by hand: be our own loomrun
}
