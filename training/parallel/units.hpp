// How the data-parallel modes cut a model for communication: units of whole
// top-level layers, last layer first (the order the backward produces their
// gradients), each a contiguous range of the flat buffers. A unit closes
// once it holds `firstCap` bytes (the first) or `cap` (the rest) of
// elements of `elementBytes` (the gradients' precision), as
// PyTorch's DDP buckets do; cap 0 makes every layer with parameters a unit
// of its own (ZeRO-3's per-layer sharding, FSDP's units). Layers without
// parameters belong to none.
//
// With SmallEnds::Both the first layers, up to `firstCap` bytes, form a
// unit of their own too (the last unit): ZeRO-1/2 gather the parameters
// unit by unit in forward order after each step, and a small first unit
// lets the next forward start while the others arrive.
#pragma once

#include <cstddef>
#include <vector>

#include "training/model.hpp"

namespace loom::train {

struct Unit {
  size_t firstLayer;  // lowest layer index in it
  size_t lastLayer;
  size_t offset;      // in the flat buffers
  size_t count;
};

enum class SmallEnds { Back, Both };
std::vector<Unit> planUnits(const std::vector<Model::Slice>& slices, size_t firstCap, size_t cap, size_t elementBytes,
                            SmallEnds ends = SmallEnds::Back);

// The unit each layer belongs to, or -1.
std::vector<long> unitOfLayer(const std::vector<Unit>& units, size_t layers);

}  // namespace loom::train
