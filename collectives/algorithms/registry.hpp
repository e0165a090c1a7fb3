// The algorithm registry. Each algorithm file defines one entry for every
// collective it implements: the name LOOM_ALGO spells, what the algorithm
// needs of the ranks' layout, its cost for the tuner, and its entry point.
// registry.cpp lists the entries; the tuner iterates them, LOOM_ALGO and its
// error messages name them, run.cpp calls the one chosen. Adding an algorithm
// is one file and one line there.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "collectives/collective.hpp"
#include "collectives/cost_model.hpp"

namespace loom::coll {

struct Plan;

// What an algorithm needs beyond the collective channel's links.
enum class Needs {
  Links,         // point-to-point connections only
  NodeSegment,   // every rank on one node's shared segment (shared memory allowed)
  UniformNodes,  // a segment per node, nodes of equal size; on others it runs the flat ring
};

struct AlgorithmEntry {
  const char* name;  // as LOOM_ALGO spells it: "ring", "rd", ...
  CollectiveKind kind;
  void (*run)(const Plan& plan);
  // Estimated microseconds for `bytes` (the bytes entering the collective
  // per rank; all-gather's whole output); infinity where the layout cannot
  // run it.
  double (*costUs)(const CostModel& model, size_t bytes);
  Needs needs = Needs::Links;
  // Folds every element's operands in rank order in one pass (what
  // LOOM_DETERMINISTIC keeps to for reductions).
  bool foldsInRankOrder = false;
  // Takes a call's device buffers as they are (run.cpp stages them for the
  // others): reads them in place where every rank's are reachable, and
  // stages them itself where not (shm_steps.hpp's onHostBuffers).
  bool readsDevice = false;

  // Runs only on the host executor: the node segment is host memory whose
  // steps the CPU takes by hand, not through an executor's primitives.
  bool hostOnly() const { return needs != Needs::Links; }
};

// Every entry, in the order the tuner breaks ties.
std::span<const AlgorithmEntry* const> algorithms();
// The entry of `name` for `kind`; null if the algorithm does not implement it.
const AlgorithmEntry* findAlgorithm(std::string_view name, CollectiveKind kind);
// True if some entry is called `name`.
bool isAlgorithmName(std::string_view name);
// "ring, rd, direct, shm, tree, hier": every name, once, in registry order.
std::string algorithmNames();

}  // namespace loom::coll
