// loom-diag's output at rank 0: the terminal report (findings first, then
// the matrices) and the JSON document (schema version 1, docs/loom-diag.schema.json).
#pragma once

#include <string>
#include <vector>

#include "tools/loom-diag/attribution.hpp"
#include "tools/loom-diag/gpu.hpp"
#include "tools/loom-diag/health.hpp"
#include "tools/loom-diag/options.hpp"

namespace loom::diag {

struct RankInfo {
  std::string host;
  int pid = 0;
  int hostKey = -1;  // the lowest rank of its host
};

struct Diagnosis {
  std::vector<RankInfo> ranks;
  std::vector<PairResult> pairs;  // every ordered pair
  std::vector<HealthResult> health;
  TcpStream tcp;          // the socket paths' limit, with two or more nodes
  GpuReport gpus;         // every host's GPU copy matrices (--gpu-size)
  double memcpyGBps = 0;  // rank 0's host, one thread
  Attribution attribution;
  int rounds = 0;
  int remeasured = 0;  // pairs measured again alone after a slow figure (in a small job, every pair)
  int confirmPasses = 0;  // how many times: until none is slow, at most 3
  int stillSlow = 0;   // ordered pairs slow after that
  double seconds = 0;
};

std::string terminalReport(const Diagnosis& d, const Options& o);
// Schema "loom-diag", version 2: docs/loom-diag.schema.json.
std::string jsonReport(const Diagnosis& d, const Options& o);
// One line per ordered pair, with a header.
std::string csvReport(const Diagnosis& d);
// The heatmap of `json` (a jsonReport on disk) as a PNG: ranks x ranks, each
// pair's bandwidth over its path's median, node boundaries drawn, slow pairs
// crossed; and, if `html` is named, one self-contained page with the heatmap,
// the findings and the tables. 0 when written, else 2 (said on stderr).
int heatmap(const std::string& json, const std::string& png, const std::string& html = "");

}  // namespace loom::diag
