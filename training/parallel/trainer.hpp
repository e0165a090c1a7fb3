// One training step in each parallel mode, over the same model, flat
// buffers and data plan, so that every mode is a re-partitioning of the
// single-process reference:
//
//   single  one process runs the global batch as M micro-batches, summing
//           their gradients in order (each into a fresh buffer, then added:
//           acc = g0, acc += g1, ...), scales the sum by 1/M, clips, steps.
//   ddp     N ranks; rank r runs micro-batches r*M/N ... of the same plan.
//           During the last one's backward, gradient buckets (whole layers,
//           last layer first; the first bucket up to 1 MiB, the others up to
//           25 MiB, as PyTorch's DDP) are all-reduced (sum) on a Loom stream
//           as soon as their layers are done, overlapping the rest of the
//           backward; one wait, then the same scaling, clipping and step on
//           every rank. Parameters start as rank 0's (a broadcast).
//
// With one micro-batch per rank and LOOM_DETERMINISTIC=1 (the all-reduce
// folds the ranks' parts in rank order, one pass), ddp's sums are the
// reference's, bit for bit.
#pragma once

#include <loom/loom.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "training/data/dataset.hpp"
#include "training/memory.hpp"
#include "training/model.hpp"
#include "training/optim/optimizer.hpp"

namespace loom::train {

enum class Mode { Single, Ddp };
// "single", "ddp"; std::invalid_argument naming the value otherwise.
Mode parseMode(const std::string& name);
const char* modeName(Mode mode);

enum class OptimizerKind { AdamW, Sgd };

struct TrainConfig {
  Mode mode = Mode::Single;
  size_t batch = 64;         // samples per step, across ranks
  size_t microBatches = 1;   // per step, across ranks (each rank runs microBatches / N)
  uint64_t steps = 10;
  uint64_t warmup = 0;
  float lr = 1e-3f;
  float minLr = 0.0f;
  double clip = 0.0;  // global gradient norm; 0: none
  OptimizerKind optimizer = OptimizerKind::AdamW;
  AdamWSettings adamw;
  SgdSettings sgd;
  size_t firstBucketBytes = 1 << 20;
  size_t bucketBytes = 25 << 20;
  uint64_t seed = 1;
};

struct StepReport {
  double loss = 0;            // mean over the global batch
  double gradNorm = 0;        // before clipping
  double seconds = 0;         // the whole step
  double commSeconds = 0;     // from the first bucket's launch to the last one's end
  double exposedSeconds = 0;  // of that, spent waiting after the backward
  size_t samples = 0;         // in the global batch
};

class Trainer {
 public:
  // comm: null for single; for ddp, every rank of it trains. Checks the
  // configuration against the ranks (std::invalid_argument naming it).
  Trainer(Model& model, const Dataset& data, const TrainConfig& config, const loom::Comm* comm,
          MemoryAccount& account);
  ~Trainer();

  StepReport step(uint64_t step);
  Optimizer& optimizer() { return *optimizer_; }
  // The buckets, as [first layer, last layer] pairs in launch order.
  std::vector<std::pair<size_t, size_t>> buckets() const;

 private:
  struct Bucket {
    size_t firstLayer;  // lowest layer index in it
    size_t lastLayer;
    size_t offset;
    size_t count;
  };
  void planBuckets();
  // One micro-batch's forward and backward into the model's gradients; its mean loss.
  double microBatch(std::span<const size_t> samples, const Model::LayerDone& done);

  Model& model_;
  const Dataset& data_;
  TrainConfig config_;
  const loom::Comm* comm_;
  int ranks_ = 1;
  int rank_ = 0;
  size_t perRank_;  // micro-batches per rank
  size_t microSize_;  // samples per micro-batch
  BatchPlan plan_;
  std::unique_ptr<Optimizer> optimizer_;
  Tracked<float> sum_;  // the micro-batches' gradient sum, when a rank runs more than one
  Tracked<float> x_;
  std::vector<int32_t> labels_;
  Tracked<float> dlogits_;
  std::vector<Bucket> buckets_;
  std::optional<loom::Stream> stream_;
};

}  // namespace loom::train
