// loom-diag's command line.
#pragma once

#include <cstddef>
#include <string>

#include "tools/loom-diag/attribution.hpp"
#include "tools/loom-diag/health_check.hpp"

namespace loom::diag {

struct Options {
  int np = 4;                 // -N: local ranks when started by hand
  size_t bytes = 8u << 20;    // --size: each bandwidth message
  int iters = 5;              // --iters: timed messages per direction
  int warmup = 1;             // --warmup
  int latencyIters = 200;     // --lat-iters: 8-byte round trips per pair
  long long maxPairs = 2016;  // --max-pairs: past this many pairs (64 ranks), the sampled schedule
  size_t healthBytes = 16u << 20;  // --health-size: collectives at 1/16 of it and at it; 0: none
  size_t gpuBytes = 64u << 20;     // --gpu-size: each GPU copy (gpu.hpp); 0: none
  Thresholds thresholds;      // --threshold, --min-drop
  Expectations expect;        // --expect-pair-bw, --expect-busbw, --expect-latency
  std::string thresholdsFile; // --thresholds: those settings for one machine type, read in flag order
  std::string jsonFile;       // --json
  std::string csvFile;        // --csv
  std::string heatmapFile;    // --heatmap (PNG)
  std::string htmlFile;       // --html (one page: heatmap, findings, tables)
};

// Parses argv; prints usage and exits 2 on anything it does not accept,
// naming the flag and the value (exit 0 for -h). A thresholds file's
// settings apply where --thresholds stands, so later flags override them.
Options parseOptions(int argc, char** argv);

// A thresholds file: one `name value` (or `name = value`) per line, the
// names those of the flags without their dashes (expect-pair-bw,
// expect-busbw, expect-latency, threshold, min-drop); '#' starts a comment.
// Exits 2 naming the file, the line and what is wrong.
void readThresholdsFile(const std::string& path, Options& o);

}  // namespace loom::diag
