// Checkpoints in one layout that every mode reads: the training state in
// the dense model's order (the flat parameter buffer one process holds),
// whatever mode and rank count wrote it, so that a run resumes under any
// other (DeepSpeed's "universal checkpoint", without its offline
// conversion step).
//
// The state is K components of P values each, P the dense model's
// parameter count (tied copies both): the fp32 parameters (in bf16 the
// master weights), then the optimizer's per-parameter state (AdamW: m,
// then v; SGD: the velocity); and the optimizer's step count. Each rank
// writes the runs of it that it owns (Trainer::save), the ranks' runs
// together covering every parameter once, and reads back whichever runs its
// own layout needs (Trainer::load).
//
// On disk, DIR/step-N/ holds one part per writing rank (part-R.bin) and a
// manifest; DIR/latest names the newest whole step-N and is renamed into
// place only after every part and the manifest are written, so a job
// killed while checkpointing leaves the previous checkpoint readable. The
// newest two are kept. A part: "LOOMCKPT", a version, the rank and the
// parts, the step, K, the number of runs; per run its offset and count
// and its K x count values (component after component); then the SHA-256
// of everything before it, so a torn or altered part is refused, not loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::train {

// A run of the dense state: parameters [offset, offset + count) and their K
// components one after another (values.size() == K x count).
struct StateRun {
  size_t offset = 0;
  size_t count = 0;
  std::vector<float> values;
};

// Where a rank keeps part of the dense state: parameters [dense, dense +
// count) at [local, local + count) of each of its component spans.
struct Placement {
  size_t dense;
  size_t local;
  size_t count;
};

// What a checkpoint is of, besides the state.
struct CheckpointInfo {
  uint64_t step = 0;            // steps done
  uint64_t optimizerSteps = 0;  // the optimizer's count (AdamW's bias correction)
  size_t params = 0;            // P
  size_t components = 0;        // K
};

// A run's flags as flag -> value ("--seed" -> "1"), all written into the
// manifest. A resume names those it must match (the model, the data, the
// learning rate's schedule, the optimizer); the others (the mode, the
// ranks, the micro-batches, the precision) are a record and may change.
using Settings = std::map<std::string, std::string>;

class CheckpointReader;

// Writing, by every rank: its part into DIR/step-N/ (created if missing;
// the file appears whole or not at all). Then, once every rank's part is
// written (the caller's barrier), rank 0 publishes: the manifest, then
// DIR/latest, then the checkpoints older than the newest two are removed.
void writePart(const std::string& dir, const CheckpointInfo& info, int rank, int parts,
               std::span<const StateRun> runs);
void publishCheckpoint(const std::string& dir, const CheckpointInfo& info, int parts, const Settings& settings);

// The runs of `components` (each indexed by `local`) that `places` name, to write.
std::vector<StateRun> runsOf(std::span<const Placement> places, const std::vector<std::span<float>>& components);

// The newest checkpoint in a directory, read on demand.
class CheckpointReader {
 public:
  // std::invalid_argument naming the directory when there is no checkpoint
  // in it, and naming the first required flag it was written with another
  // value of ("--resume: the checkpoint in DIR was written with --seed 1, not 2").
  CheckpointReader(const std::string& dir, const Settings& required);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const CheckpointInfo& info() const { return info_; }
  // Every setting it was written with, required and recorded.
  const Settings& settings() const { return settings_; }
  // Component c of parameters [offset, offset + out.size()) into out;
  // std::runtime_error naming the part on a torn, altered or foreign part,
  // or the parameters no part holds.
  void read(size_t component, size_t offset, std::span<float> out) const;
  // Each placement's parameters into `components` (each indexed by `local`).
  void readInto(std::span<const Placement> places, const std::vector<std::span<float>>& components) const;

 private:
  struct Part;
  const Part& part(int index) const;

  std::string path_;  // DIR/step-N
  CheckpointInfo info_;
  int parts_ = 0;
  Settings settings_;
  mutable std::vector<std::unique_ptr<Part>> loaded_;  // by index, read when first needed
};

}  // namespace loom::train
