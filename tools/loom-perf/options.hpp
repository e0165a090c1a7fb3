// loom-perf's command line: nccl-tests' flags, plus what its users ask for
// (machine-readable output, per-iteration statistics).
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <string>
#include <vector>

#include "tools/check/collective_check.hpp"

namespace loom::perf {

// How one figure per rank becomes the reported one (-a).
enum class Aggregate { Min, Max, Avg };

struct Options {
  std::string collective;  // as typed: all_reduce, ..., barrier
  bool barrier = false;
  check::Coll coll = check::Coll::AllReduce;
  int np = 4;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  size_t minBytes = 8;
  size_t maxBytes = 8;
  double factor = 2;
  size_t increment = 0;  // -i: step by bytes instead of by factor
  std::vector<loomDataType_t> types{loomFloat32};  // -d: one, or all
  std::vector<check::Op> ops{check::Op::Sum};      // -o: one, or all
  int root = 0;
  Aggregate aggregate = Aggregate::Max;  // -a: the slowest rank by default
  bool perIteration = false;             // -I 1: min, p50, p99 and CV of single iterations
  bool freshInputs = false;              // -F 1: rewrite the input before each call (fresh_inputs.hpp)
  std::string algo;                      // --algo: LOOM_ALGO for this run
  std::string jsonFile;
  std::string csvFile;
  bool loomMemAlloc = false;  // -R 1: buffers from loomMemAlloc, which peers on the node read in place
  bool gpu = false;           // -G 1: buffers on a GPU (local rank mod the devices), calls on a CUDA stream
  bool windows = false;       // -W 1: the GPU buffers registered as symmetric windows (loomCommWindowRegister)
  bool corruptOne = false;    // test hook: flips one result element before the check
};

// "malloc", "loomMemAlloc", "cuda" or "cuda-windows": where the buffers come from.
const char* bufferSource(const Options& o);

// Parses argv; prints usage and exits 2 on anything it does not accept
// (exit 0 for -h), naming the flag and the value.
Options parseOptions(int argc, char** argv);

const char* aggregateName(Aggregate a);

}  // namespace loom::perf
