// The measurement loop that the peer programs (mpi_perf, gloo_perf) share
// with loom-perf's method, so that their figures compare: for each size from
// -b to -e by factor -f, -w warm-up iterations, then -n timed iterations back
// to back, reporting the mean time of one on the slowest rank (as loom-perf
// does by default: a broadcast's root may return long before its receivers
// have the data, and timing it alone would time no broadcast) and nccl-tests'
// bus bandwidth. With -F 1 each rank rewrites its input before each call and
// only the calls are timed (tools/loom-perf/fresh_inputs.hpp).
// Output, one line per size on rank 0: "size_bytes time_us busbw_GBps".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "tools/loom-perf/fresh_inputs.hpp"

namespace loom::bench {

struct Sweep {
  std::string collective = "all_reduce";  // all_reduce, all_gather, reduce_scatter, broadcast, sendrecv (mpi_perf)
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  size_t factor = 2;
  int iters = 20;
  int warmup = 5;
  bool freshInputs = false;  // -F 1
  int nranks = 2;  // gloo_perf: ranks to fork; mpi_perf takes MPI's
  // gloo_perf across machines: run only this rank (of -N), meeting the others
  // in the file store --store, its TCP device on --addr.
  int rank = -1;
  std::string store;
  std::string address = "127.0.0.1";
};

// Parses "COLLECTIVE [-b N] [-e N] [-f N] [-n N] [-w N] [-F 0|1] [-N N] [--rank R --store DIR --addr IP]"
// (K/M/G suffixes).
inline Sweep parseSweep(int argc, char** argv) {
  Sweep s;
  auto bytes = [](const char* text) {
    char* end = nullptr;
    double v = std::strtod(text, &end);
    switch (end != nullptr ? *end : 0) {
      case 'K': case 'k': v *= 1024; break;
      case 'M': case 'm': v *= 1024 * 1024; break;
      case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
      default: break;
    }
    return static_cast<size_t>(v);
  };
  if (argc > 1) s.collective = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "-b") s.minBytes = bytes(value);
    else if (flag == "-e") s.maxBytes = bytes(value);
    else if (flag == "-f") s.factor = static_cast<size_t>(std::atoi(value));
    else if (flag == "-n") s.iters = std::atoi(value);
    else if (flag == "-w") s.warmup = std::atoi(value);
    else if (flag == "-F") s.freshInputs = std::atoi(value) != 0;
    else if (flag == "-N") s.nranks = std::atoi(value);
    else if (flag == "--rank") s.rank = std::atoi(value);
    else if (flag == "--store") s.store = value;
    else if (flag == "--addr") s.address = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (s.collective != "all_reduce" && s.collective != "all_gather" && s.collective != "reduce_scatter" &&
      s.collective != "broadcast" && s.collective != "sendrecv") {
    std::fprintf(stderr, "collective must be all_reduce, all_gather, reduce_scatter, broadcast or sendrecv\n");
    std::exit(2);
  }
  if (s.factor < 2) s.factor = 2;
  return s;
}

// nccl-tests' bus bandwidth factor for `collective` on n ranks.
inline double busFactor(const std::string& collective, int n) {
  if (collective == "all_reduce") return 2.0 * (n - 1) / n;
  if (collective == "broadcast" || collective == "sendrecv") return 1.0;
  return static_cast<double>(n - 1) / n;
}

// The bytes of this rank's input to a collective of total size `bytes`.
inline size_t inputBytes(const std::string& collective, size_t bytes, int n) {
  return collective == "all_gather" ? bytes / static_cast<size_t>(n) : bytes;
}

// Runs the sweep: `run(bytes)` performs one collective of `bytes` (the
// total size S of nccl-tests: the whole gathered buffer for all-gather and
// reduce-scatter); `barrier()` aligns the ranks before each timed loop;
// `slowest(us)` returns the largest of every rank's `us` (on rank 0 at
// least); `input` is where the collective reads this rank's input (for -F).
inline void runSweep(const Sweep& s, int rank, int n, const std::function<void(size_t)>& run,
                     const std::function<void()>& barrier, const std::function<double(double)>& slowest,
                     void* input) {
  using Clock = std::chrono::steady_clock;
  if (rank == 0) std::printf("# %s on %d ranks: size_bytes time_us busbw_GBps\n", s.collective.c_str(), n);
  for (size_t bytes = s.minBytes; bytes <= s.maxBytes; bytes *= s.factor) {
    for (int i = 0; i < s.warmup; ++i) run(bytes);
    barrier();
    double total = 0;
    if (s.freshInputs) {
      for (int i = 0; i < s.iters; ++i) {
        perf::rewriteLines(input, inputBytes(s.collective, bytes, n));
        const auto start = Clock::now();
        run(bytes);
        total += std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      }
    } else {
      const auto start = Clock::now();
      for (int i = 0; i < s.iters; ++i) run(bytes);
      total = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    }
    const double us = slowest(total / s.iters);
    if (rank == 0) {
      std::printf("%zu %.2f %.3f\n", bytes, us, static_cast<double>(bytes) / us / 1e3 * busFactor(s.collective, n));
      std::fflush(stdout);
    }
  }
}

}  // namespace loom::bench
