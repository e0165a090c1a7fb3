// The order the ring and chain algorithms walk: the communicator's topology
// ring (each host's ranks together, socket by socket; topology/placement.hpp),
// seen as positions 0..n-1. Identity on one host with one socket. A ring may
// also hold only some of the communicator's ranks (the hierarchical
// algorithm's ring across hosts).
#pragma once

#include <cstddef>
#include <vector>

namespace loom::coll {

class Ring {
 public:
  // `order`: distinct ranks of a communicator of `nranks`.
  Ring(std::vector<int> order, int nranks);

  int size() const { return static_cast<int>(order_.size()); }
  int position(int rank) const { return position_[static_cast<size_t>(rank)]; }  // -1 if not on it
  // The rank at `position`, taken modulo the ring's size (any int).
  int at(int position) const;

 private:
  std::vector<int> order_;
  std::vector<int> position_;
};

}  // namespace loom::coll
