// The ranks that share one layer's parameters under tensor parallelism
// (Megatron-LM, Shoeybi et al. 2019), and how a dimension is dealt among
// them: in whole units (a head's channels, one column, one vocabulary
// row), the first units % size ranks holding one unit more, so that any
// size splits (13 inputs over 2 ranks: 7 and 6).
#pragma once

#include <loom/loom.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace loom::train {

struct TensorGroup {
  const loom::Comm* comm = nullptr;
  int rank = 0;
  int size = 1;
  uint64_t* bytes = nullptr;  // where the bytes handed to Loom are counted, if anywhere

  // The group's all-reduce (nothing to do alone), counted.
  void allReduce(std::span<float> data, loomRedOp_t op = loomSum) const {
    if (size <= 1) return;
    comm->allReduce(data, op);
    if (bytes != nullptr) *bytes += data.size_bytes();
  }
};

struct Share {
  size_t first;  // in units
  size_t count;
};

inline Share shareOf(size_t units, int parts, int part) {
  const size_t n = static_cast<size_t>(parts), r = static_cast<size_t>(part);
  const size_t base = units / n, extra = units % n;
  return {r * base + (r < extra ? r : extra), base + (r < extra ? 1 : 0)};
}

}  // namespace loom::train
