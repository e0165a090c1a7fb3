#include "training/layers/tensor_group.hpp"

#include <algorithm>

namespace loom::train {

Share shareOf(size_t units, int parts, int part) {
  const size_t n = static_cast<size_t>(parts), r = static_cast<size_t>(part);
  const size_t base = units / n, extra = units % n;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

void TensorGroup::allReduce(std::span<float> data, loomRedOp_t op) const {
  if (size <= 1) return;
  comm->allReduce(data, op);
  if (bytes != nullptr) *bytes += data.size_bytes();
}

void TensorGroup::allGatherRows(std::span<const float> local, std::span<float> full) const {
  if (size <= 1) {
    std::copy(local.begin(), local.end(), full.begin());
    return;
  }
  comm->allGather(local, full);
  if (bytes != nullptr) *bytes += local.size_bytes();
}

void TensorGroup::reduceScatterRows(std::span<const float> full, std::span<float> local) const {
  if (size <= 1) {
    std::copy(full.begin(), full.end(), local.begin());
    return;
  }
  comm->reduceScatter(full, local);
  if (bytes != nullptr) *bytes += full.size_bytes();
}

}  // namespace loom::train
