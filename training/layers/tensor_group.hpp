// The ranks that share one layer's parameters under tensor parallelism
// (Megatron-LM, Shoeybi et al. 2019), how a dimension is dealt among them,
// and the four mappings between the parallel region and the rest:
//
//   f  enters a region: identity forward, all-reduce of dL/dx backward;
//   g  leaves it: all-reduce forward, identity backward;
//
// and, with sequence parallelism (Korthikanti et al. 2022), where the
// activations outside the regions are split by rows (each rank holding
// rows / size of them, in rank order):
//
//   f' enters: all-gather of the rows forward, reduce-scatter backward;
//   g' leaves: reduce-scatter forward, all-gather backward;
//
// the same bytes as f and g (an all-reduce is a reduce-scatter and an
// all-gather), while layer norms and residuals outside the regions work on
// a 1/size share of the rows.
//
// A dimension is dealt in whole units (a head's channels, one column, one
// vocabulary row), the first units % size ranks holding one unit more, so
// that any size splits (13 inputs over 2 ranks: 7 and 6).
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
  bool sequence = false;       // sequence parallelism: rows split outside the regions
  uint64_t* bytes = nullptr;  // where the bytes handed to Loom are counted, if anywhere
  double* seconds = nullptr;  // and the time the caller waited on them (exposed)
  loom::Stream* stream = nullptr;  // where a started all-reduce runs (none: it blocks)

  // g forward (nothing to do alone), counted.
  void allReduce(std::span<float> data, loomRedOp_t op = loomSum) const;
  // f backward, started: the sum of `data` runs on `stream` while the caller
  // computes (Megatron overlaps it with the weight gradient's product), and
  // finish() waits for it. Without a stream, start does it all.
  void startAllReduce(std::span<float> data) const;
  void finish() const;
  // f' forward and g' backward: every rank's rows (local.size() each) into
  // full, in rank order.
  void allGatherRows(std::span<const float> local, std::span<float> full) const;
  // g' forward and f' backward: the ranks' full tensors summed, this rank's
  // rows of the sum into local.
  void reduceScatterRows(std::span<const float> full, std::span<float> local) const;

 private:
  // Counts a call begun at `from` (steady clock, seconds) that handed `handed` bytes to Loom.
  void count(size_t handed, double from) const;
};

struct Share {
  size_t first;  // in units
  size_t count;
};

Share shareOf(size_t units, int parts, int part);

}  // namespace loom::train
