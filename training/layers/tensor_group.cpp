#include "training/layers/tensor_group.hpp"

#include <algorithm>

#include "training/clock.hpp"

namespace loom::train {

Share shareOf(size_t units, int parts, int part) {
  const size_t n = static_cast<size_t>(parts), r = static_cast<size_t>(part);
  const size_t base = units / n, extra = units % n;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

void TensorGroup::allReduce(std::span<float> data, loomRedOp_t op) const {
  if (size <= 1) return;
  const double from = monotonicSeconds();
  comm->allReduce(data, op);
  count(data.size_bytes(), from);
}

void TensorGroup::allGatherRows(std::span<const float> local, std::span<float> full) const {
  if (size <= 1) {
    std::copy(local.begin(), local.end(), full.begin());
    return;
  }
  const double from = monotonicSeconds();
  comm->allGather(local, full);
  count(local.size_bytes(), from);
}

void TensorGroup::reduceScatterRows(std::span<const float> full, std::span<float> local) const {
  if (size <= 1) {
    std::copy(full.begin(), full.end(), local.begin());
    return;
  }
  const double from = monotonicSeconds();
  comm->reduceScatter(full, local);
  count(full.size_bytes(), from);
}

void TensorGroup::startAllReduce(std::span<float> data) const {
  if (stream == nullptr) return allReduce(data);
  if (size <= 1) return;
  comm->allReduce(data, loomSum, stream);
  if (bytes != nullptr) *bytes += data.size_bytes();
}

void TensorGroup::finish() const {
  if (stream == nullptr || size <= 1) return;
  const double from = monotonicSeconds();
  stream->synchronize();
  count(0, from);
}

void TensorGroup::count(size_t handed, double from) const {
  if (bytes != nullptr) *bytes += handed;
  if (seconds != nullptr) *seconds += monotonicSeconds() - from;
}

}  // namespace loom::train
