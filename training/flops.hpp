// Model FLOPs utilization, as llm.c and nanoGPT report it: the FLOPs a
// training step must do by the model's arithmetic (whatever the mode
// recomputes or pads), over the time it took, against the machine's peak.
//
// A training step does 6 FLOPs per parameter per row of a dense layer (2
// forward, 4 backward: dL/dx and dL/dW); embedding tables are looked up, not
// multiplied, and count nothing. Attention adds, per token, 12 x layers x
// dim x context (QK^T and the weighted sum of V, each 2 x dim x context
// forward and twice that backward, counted over the whole context as
// nanoGPT and llm.c do, not halved for the causal mask).
#pragma once

#include <cstddef>

#include "training/model.hpp"
#include "training/models/gpt.hpp"

namespace loom::train {

// FLOPs of one sample's forward and backward: a GPT window of shape.context
// tokens (gpt given) or an MLP row.
double flopsPerSample(const Model& model, const GptShape* gpt);

// This process's sgemm rate in FLOP/s: square products on the threads
// OpenBLAS was given, repeated for about `seconds`, the fastest one's. Ranks
// that share cores measure at once, so their sum is what the job can reach.
double measurePeakFlops(double seconds = 0.05);

}  // namespace loom::train
