// What every ring algorithm starts with: the ring, its size, this rank's
// position on it, and the collective's links with primitives from the
// previous position to the next: one piece, which the ring files begin with.
#pragma once

#include "collectives/algorithms/algorithms.hpp"

namespace loom::coll {

struct RingWalk {
  explicit RingWalk(const Plan& plan);
  RingWalk(const RingWalk&) = delete;
  RingWalk& operator=(const RingWalk&) = delete;

  const Ring& ring;
  int n;         // positions on the ring
  int position;  // this rank's
  Links links;
  std::unique_ptr<Primitives> prims;  // uses `links`, so it comes after them
};

}  // namespace loom::coll
