#include "collectives/ring.hpp"

#include "base/error.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

Ring::Ring(std::vector<int> order, int nranks) : order_(std::move(order)), position_(static_cast<size_t>(nranks), -1) {
  for (size_t p = 0; p < order_.size(); ++p) {
    const int r = order_[p];
    if (r < 0 || r >= nranks || position_[static_cast<size_t>(r)] >= 0) {
      throw Error(loomInternalError, "a ring holds a rank twice, or one the communicator lacks");
    }
    position_[static_cast<size_t>(r)] = static_cast<int>(p);
  }
}

int Ring::at(int position) const { return order_[static_cast<size_t>(ringIndex(position, size()))]; }

}  // namespace loom::coll
