#include "training/parallel/units.hpp"

namespace loom::train {

std::vector<Unit> planUnits(const std::vector<Model::Slice>& slices, size_t firstCap, size_t cap, size_t elementBytes,
                            SmallEnds ends) {
  // Layers [0, front) are the forward's first unit (SmallEnds::Both).
  size_t front = 0;
  if (ends == SmallEnds::Both && cap > 0) {
    for (size_t bytes = 0; front < slices.size() && bytes < firstCap; ++front) bytes += slices[front].count * elementBytes;
  }
  std::vector<Unit> units;
  // Layer i (with parameters) into the last unit, or a new one.
  const auto take = [&](size_t i, bool open) {
    if (open) units.push_back({i, i, slices[i].offset, 0});
    Unit& u = units.back();
    u.firstLayer = i;
    u.offset = slices[i].offset;
    u.count += slices[i].count;
  };
  size_t closeAt = firstCap;
  for (size_t i = slices.size(); i-- > front;) {
    if (slices[i].count == 0) continue;
    const bool full = !units.empty() && units.back().count * elementBytes >= closeAt;
    if (full) closeAt = cap;
    take(i, units.empty() || full);
  }
  const size_t back = units.size();
  for (size_t i = front; i-- > 0;) {
    if (slices[i].count != 0) take(i, units.size() == back);
  }
  return units;
}

std::vector<long> unitOfLayer(const std::vector<Unit>& units, size_t layers) {
  std::vector<long> out(layers, -1);
  for (size_t u = 0; u < units.size(); ++u) {
    for (size_t i = units[u].firstLayer; i <= units[u].lastLayer; ++i) out[i] = static_cast<long>(u);
  }
  return out;
}

}  // namespace loom::train
