// The machine and the plan as JSON: what LOOM_TOPO_DUMP_FILE and
// `loom-topo --json` write.
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"
#include "topology/placement.hpp"
#include "topology/system.hpp"

namespace loom::topo {

// The devices worth a path matrix: the GPUs then the NICs, or the CPUs then
// the NICs on a machine without GPUs.
std::vector<int> pathEndpoints(const System& sys);

void writeSystem(JsonWriter& json, const System& sys);
void writePlacement(JsonWriter& json, const Placement& placement);

// {"system": ..., "placement": ...}; the placement only when given.
std::string dumpJson(const System& sys, const Placement* placement);

}  // namespace loom::topo
