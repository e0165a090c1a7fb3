// What loom-train reports of a run, and its --json record, written through
// base/json.hpp's JsonWriter (strings escaped, doubles exact).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::train::cli {

// One step as the lead rank saw it. The per-rank columns are filled for the
// mesh modes (pp, tp, 3d) only, one entry per rank.
struct StepRecord {
  uint64_t step = 0;
  double loss = 0;
  double gradNorm = 0;
  double seconds = 0;
  double commSeconds = 0;
  double exposedCommSeconds = 0;
  uint64_t samples = 0;
  double flopsPerSecond = 0;  // the model's FLOPs of the step (flops.hpp) over its time
  double mfu = 0;             // of the job's measured sgemm peak
  double heldOutLoss = -1;    // --eval-every: measured after this step (-1: not)
  std::string sample{};       // --sample: the text generated after this step, escaped
  std::vector<double> rankIdle{};
  std::vector<double> rankSentDp{}, rankSentPp{}, rankSentTp{};  // bytes
  std::vector<double> rankActivationPeak{};                       // bytes
};

struct RunRecord {
  // The run's shape.
  std::string model, mode, precision;
  int ranks = 1;
  size_t batch = 0, microBatches = 0, layers = 0, dim = 0;
  uint64_t steps = 0, seed = 0;
  double lr = 0;
  double peakFlops = 0;  // the job's: every rank's sgemm at once, summed
  bool mesh = false;  // pp, tp, 3d: the fields below are written
  std::string schedule;
  int chunks = 0, dp = 1, pp = 1, tp = 1;

  std::vector<StepRecord> records{};

  // The end of the run.
  std::string paramsSha256{};
  size_t psi = 0;
  double testAccuracy = -1;  // -1: not measured
  double heldOutLoss = -1;
  std::string sample{};
  std::vector<std::pair<std::string, size_t>> peakBytes{};  // per memory category
  std::vector<double> rankActivationPeak{};                 // mesh: per rank
};

// Writes `run` as JSON to `path`; throws std::runtime_error if it cannot.
void writeJson(const std::string& path, const RunRecord& run);

}  // namespace loom::train::cli
