// loom-train's command line: what to train, how, and where to report it.
#pragma once

#include <cstdint>
#include <string>

#include "training/parallel/trainer.hpp"

namespace loom::train::cli {

struct Options {
  std::string model = "mlp";
  TrainConfig train;
  Precision precision = Precision::Fp32;  // --precision
  int ranks = 0;          // -N: local ranks to start when not under a launcher (0: 1 for single, 2 for ddp)
  size_t hidden = 0;      // --dim (0: the model's default, mlp 256, gpt 128)
  size_t layers = 0;      // --layers (0: the model's default, mlp 1, gpt 4)
  size_t heads = 4;       // --heads (gpt)
  size_t context = 64;    // --seq (gpt)
  bool tie = false;       // --tie (gpt): the head's weight is the token embedding
  bool recompute = false; // --recompute (gpt): blocks recompute their activations in backward
  size_t dataLimit = 0;   // --data-limit: the first samples of the training set only (0: all)
  std::string data;       // --data FILE (gpt): llm.c's token file to train on, in place of The Devil's Dictionary
  std::string dataVal;    // --data-val FILE (gpt): its held-out tokens (default: the last tenth of --data)
  size_t vocab = 0;       // --vocab V (gpt with --data): the vocabulary (default: the largest id + 1)
  std::string tokenizer;  // --tokenizer FILE (with --data): llm.c's tokenizer, for samples as text instead of ids
  bool evaluate = true;   // --eval
  uint64_t evalEvery = 0;   // --eval-every N: held-out loss every N steps (0: at the end only, with --eval)
  uint64_t sampleEvery = 0; // --sample N (gpt): text generated every N steps and at the end (0: none)
  uint64_t sampleSeed = 0;  // --sample-seed S: 0 greedy, else drawn from the softmax, seeded
  int blasThreads = 1;    // --blas-threads
  bool microBatchesGiven = false;  // else one per rank
  std::string json;       // --json FILE
  std::string timeline;   // --timeline FILE (pp)
  std::string checkpoint;        // --checkpoint DIR
  uint64_t checkpointEvery = 0;  // --checkpoint-every K (0: at the end only)
  std::string resumeFrom;        // --resume 1 (the --checkpoint DIR) or --resume-from DIR: continue from
                                 // its newest checkpoint, whatever mode and ranks wrote it ("": start afresh)
  uint64_t stopAfter = 0;        // --stop-after K: leave after step K (0: run all --steps)
};

// Throws std::invalid_argument naming the flag on anything unknown or out of range.
Options parseOptions(int argc, char** argv);
const char* usage();

}  // namespace loom::train::cli
