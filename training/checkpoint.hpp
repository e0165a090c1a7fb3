// Checkpoints: each rank writes what it keeps (trainer.hpp's state(): all
// the parameters and the optimizer's state, or under ZeRO its shards of
// them) to its own file, and rank 0 a manifest of the configuration that
// wrote them. Resuming reads the manifest first and refuses a checkpoint of
// another configuration by name, then fills the trainer's state back and
// continues from the step after it, bit for bit (the data plan and the
// learning rate are functions of the step).
//
// A rank's file: "LOOMCKPT", a version, the rank and the ranks, the step,
// the optimizer's step count, the buffers (a count and the floats each),
// then the SHA-256 of everything before it, so a torn or altered file is
// refused instead of loaded.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace loom::train {

// The configuration a checkpoint belongs to, as flag = value pairs
// ("--mode" -> "zero2", ...): a resume must match every one.
using Manifest = std::map<std::string, std::string>;

// Writes this rank's file into `dir` (created if missing); the file appears
// whole or not at all (written aside, then renamed).
void writeRankState(const std::string& dir, int rank, int ranks, uint64_t step, uint64_t optimizerSteps,
                    std::span<const std::span<float>> buffers);
// Rank 0, after every rank wrote its file: the manifest, with the step.
void writeManifest(const std::string& dir, const Manifest& manifest, uint64_t step);

// The step a checkpoint was taken after; std::invalid_argument naming the
// first entry of `expected` that differs ("--resume: the checkpoint in DIR
// was written with --mode zero2, not zero3"), or naming what is missing.
uint64_t readManifest(const std::string& dir, const Manifest& expected);
// Fills `buffers` (sized as when written) from this rank's file and returns
// the optimizer's step count; std::runtime_error naming the file on any defect.
uint64_t readRankState(const std::string& dir, int rank, int ranks, uint64_t step,
                       std::span<const std::span<float>> buffers);

}  // namespace loom::train
