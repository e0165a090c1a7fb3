#include "collectives/algorithms/ring_walk.hpp"

namespace loom::coll {

RingWalk::RingWalk(const Plan& plan)
    : ring(*plan.ring),
      n(plan.nranks),
      position(ring.position(plan.rank)),
      links(plan.links()),
      prims(plan.primitives(links, ring.at(position - 1), ring.at(position + 1))) {}

}  // namespace loom::coll
