// One training step in each parallel mode, over the same model, flat
// buffers and data plan, so that every mode is a re-partitioning of the
// single-process reference:
//
//   single  one process runs the global batch as M micro-batches, summing
//           their gradients in order (each into a fresh buffer, then added:
//           acc = g0, acc += g1, ...), scales the sum by 1/M, clips, steps.
//   ddp     N ranks; rank r runs micro-batches r*M/N ... of the same plan.
//           Gradient buckets are all-reduced on a Loom stream as their
//           layers finish the last micro-batch's backward (data_parallel.cpp).
//   zero1-3 the same ranks and micro-batches, with the optimizer's state
//           (1), the gradients too (2) and the parameters too (3) sharded
//           over the ranks unit by unit (zero.cpp).
//   pp      N ranks as pipeline stages, each holding a contiguous run of
//           layers (or v runs, interleaved), every micro-batch of the plan
//           flowing through them as the schedule says (mesh.cpp).
//   tp      N ranks holding a share of every layer (Megatron's tensor
//           parallelism; the GPT only).
//   3d      D x P x T ranks: T-rank tensor groups (innermost, neighbours in
//           rank order) as the stages of P-stage pipelines, D of them
//           data parallel, each running M / D of the micro-batches.
//
// With one micro-batch per rank and LOOM_DETERMINISTIC=1 (all-reduce and
// reduce-scatter fold the ranks' parts in rank order, one pass), every
// mode's sums are the reference's, bit for bit.
#pragma once

#include <loom/loom.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "training/checkpoint.hpp"
#include "training/data/dataset.hpp"
#include "training/memory.hpp"
#include "training/layers/tensor_group.hpp"
#include "training/model.hpp"
#include "training/optim/optimizer.hpp"
#include "training/parallel/schedule.hpp"
#include "training/parallel/timeline.hpp"

namespace loom::train {

enum class Mode { Single, Ddp, Zero1, Zero2, Zero3, Pp, Tp, ThreeD };
// "single", "ddp", "zero1", "zero2", "zero3", "pp", "tp", "3d"; std::invalid_argument naming the value otherwise.
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
  size_t firstBucketBytes = 1 << 20;  // ddp, zero1, zero2: PyTorch's first bucket
  size_t bucketBytes = 25 << 20;      // and the rest
  uint64_t seed = 1;
  ScheduleKind schedule = ScheduleKind::OneFOneB;  // pp
  int chunks = 1;                                  // pp: model chunks per rank (interleaved)
  std::string stages;                              // pp: layers per chunk, "3,5,3" (empty: balanced)
  bool balanceByTime = false;                      // pp: balance chunks by measured time, not parameters
  int dp = 0, pp = 0, tp = 0;                      // 3d: the mesh (pp: 1 x N x 1, tp: 1 x 1 x N)
  bool sequenceParallel = false;                   // tp, 3d: rows split outside the tensor-parallel regions
  Mode dataParallel = Mode::Ddp;                   // 3d: ddp, or zero1 (the optimizer sharded over the replicas)
};

struct StepReport {
  double loss = 0;            // mean over the global batch
  double gradNorm = 0;        // before clipping
  double seconds = 0;         // the whole step
  double commSeconds = 0;     // from the first collective's launch to the last one's end
  double exposedSeconds = 0;  // of that, spent waiting with nothing else to do
  size_t samples = 0;         // in the global batch
  // pp, tp, 3d: this rank's share of the step spent neither computing nor
  // in the optimizer (waiting on its neighbours: the bubble), the bytes it
  // handed to Loom on each axis (sends, and each collective's own data),
  // and what it did when.
  double idleShare = 0;
  struct AxisBytes {
    uint64_t dp = 0, pp = 0, tp = 0;
  } bytes;
  std::vector<TimelineEvent> events;
};

class Trainer {
 public:
  virtual ~Trainer() = default;
  virtual StepReport step(uint64_t step) = 0;
  // Makes model.params() hold every parameter, as every rank agrees on them
  // (ZeRO-3 gathers them); for checking and evaluating after training.
  virtual void materialize() {}
  // Every parameter in the dense model's order, in float32 (bf16 widened),
  // on every rank, the model left as training keeps it (collective): what a
  // held-out evaluation or a sample runs on between steps.
  virtual std::vector<float> denseParams() = 0;

  // Checkpoints (checkpoint.hpp), in the dense model's order whatever the
  // mode: the runs of the state this rank writes (the ranks' runs cover
  // every parameter once), and the state filled back from a checkpoint any
  // mode wrote, with what follows from it (ZeRO-1/2 gather the full
  // parameters from the shards, bf16 narrows the master weights). Both
  // collective.
  virtual std::vector<StateRun> save() = 0;
  virtual void load(const CheckpointReader& from) = 0;
  // The optimizer's step count and state components (the first one's, in a
  // mode with several).
  virtual Optimizer& optimizer() = 0;
  // How the model is laid out over the ranks, for a person ("" when whole on each).
  virtual std::string layout() const { return {}; }
};

// Builds the layers of `model` again, unallocated (buildGpt(m, shape,
// false, tensor)), as the tensor group's share when there is one: pp, tp and
// 3d build one copy of their chunks' layers per micro-batch in flight.
using ModelRecipe = std::function<void(Model&, const TensorGroup*)>;

// The trainer of config.mode. comm: null for single; the ranks of it train
// otherwise. Checks the configuration against the ranks and the data
// (std::invalid_argument naming the flag). pp, tp and 3d need the recipe.
std::unique_ptr<Trainer> makeTrainer(Model& model, const Dataset& data, const TrainConfig& config,
                                     const loom::Comm* comm, MemoryAccount& account, const ModelRecipe& recipe = {});

}  // namespace loom::train
