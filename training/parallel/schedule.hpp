// Pipeline schedules as tables: for each rank (a stage), the actions it
// runs in order in one training step. One function makes every schedule;
// one engine (pipeline.cpp) runs any of them; one simulator checks them
// without any communication.
//
// The model is cut into P = stages x chunks model chunks, in layer order;
// rank s holds chunks s, s + stages, s + 2 stages, ... (Megatron's
// interleaving; one chunk per rank otherwise). Edge e joins chunk e to
// chunk e + 1: micro-batch i's activation crosses it forward, its gradient
// backward.
//
//   GPipe (Huang et al. 2019)  every micro-batch forward, then every one
//        backward: a stage holds the activations of all m at once.
//   1F1B (PipeDream-Flush, Narayanan et al. 2021)  stage s runs
//        stages - s - 1 forwards, then alternates one forward and one
//        backward, then drains: it holds at most stages - s micro-batches.
//   Interleaved 1F1B (Megatron, Narayanan et al. SC21)  1F1B over v chunks
//        per rank, micro-batches in groups of `stages` per chunk, warm-up
//        (stages - s - 1) x 2 + (v - 1) x stages; m a multiple of stages.
//   ZB-H1 (Zero Bubble, Qi et al. ICLR 2024)  backward split in two: B,
//        dL/dx, which the stage before waits for, and W, the parameters'
//        gradients, which nobody waits for. 1F1B's order of F and B, with
//        stage s holding back its W's until s of them are pending, so that
//        the W's fill the drain where 1F1B's stages wait for gradients;
//        a stage then holds at most `stages` micro-batches (1F1B's first
//        stage's peak) and, with F, B and W of equal length, the bubble
//        shrinks from 1F1B's (p - 1)(F + B + W) to (p - 1)(F + B - W).
//
// Each stage's bubble is (stages - 1) / m of its busy time for the first
// two and (stages - 1) / (v m) for the third. Every rank runs its
// micro-batches' backward (or W) in ascending order on each chunk, so
// gradients are summed in the order the single-process reference sums them.
//
// Communication sits between computations as exchanges: the sends of what
// the last computation made and the receive of what the next one needs.
// Sends never hold the rank up: each kind (activations, gradients) goes out
// in order on a stream of its own, as PyTorch's pipelining posts isend, and
// on a communicator of its own, so that each direction between two ranks
// carries one kind in one order. A rank waits only for what it receives,
// so a table cannot deadlock unless its data dependencies close a cycle,
// which the simulator would find.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace loom::train {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };
// "gpipe", "1f1b", "interleaved", "zb-h1"; std::invalid_argument naming the value otherwise.
ScheduleKind parseSchedule(const std::string& name);
const char* scheduleName(ScheduleKind kind);

struct PipelineShape {
  int stages = 1;        // ranks in the pipeline
  int microBatches = 1;  // m
  int chunks = 1;        // v, model chunks per rank (interleaved only)
  int modelChunks() const { return stages * chunks; }
  int owner(int chunk) const { return chunk % stages; }
};

struct Transfer {
  enum class Kind { Activation, Gradient };
  Kind kind;
  bool send;
  int peer;
  int micro;
  int edge;  // chunk edge -> edge + 1
};

struct Action {
  // Backward is B and W at once; a zero-bubble table runs them apart.
  enum class Op { Forward, Backward, BackwardInput, BackwardWeights, Exchange };
  Op op;
  int micro = 0;                   // every computation
  int chunk = 0;                   // every computation: the model chunk
  std::vector<Transfer> transfers;  // Exchange: posted together
};

// actions[rank]: what that rank runs, in order, in one step.
using Schedule = std::vector<std::vector<Action>>;

// Throws std::invalid_argument naming the flag for a shape the kind cannot
// run (interleaved: chunks >= 2 and m a multiple of stages; the others one chunk).
Schedule makeSchedule(ScheduleKind kind, const PipelineShape& shape);

// How long each computation takes; a whole backward takes input + weights.
struct StepCosts {
  double forward = 1;
  double input = 1;    // B
  double weights = 1;  // W
};

// What running a schedule shows, computations taking `costs` and
// transfers none: a receive finishes once
// its send is posted, sends pair with receives in order per (kind, sender,
// receiver), and a rank blocked on a receive that can never come is a
// deadlock.
struct ScheduleRun {
  std::vector<std::string> errors;             // broken rules and deadlocks; empty when sound
  std::vector<double> idle;                    // per rank: idle time / busy time
  std::vector<std::vector<int>> peakInFlight;  // [rank][local chunk]: most micro-batches forward but not backward
  double makespan = 0;
};
ScheduleRun simulate(const Schedule& schedule, const PipelineShape& shape, const StepCosts& costs);

// The most micro-batches in flight on each of `rank`'s chunks at once (its
// activation stashes: from a forward to the backward, or the W, that ends
// its use), from the table alone.
std::vector<int> stashesNeeded(const Schedule& schedule, const PipelineShape& shape, int rank);

}  // namespace loom::train
