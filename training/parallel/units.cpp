#include "training/parallel/units.hpp"

namespace loom::train {

std::vector<Unit> planUnits(const std::vector<Model::Slice>& slices, size_t firstCap, size_t cap, size_t elementBytes) {
  std::vector<Unit> units;
  size_t closeAt = firstCap;
  for (size_t i = slices.size(); i-- > 0;) {
    if (slices[i].count == 0) continue;
    if (units.empty() || units.back().count * elementBytes >= closeAt) {
      if (!units.empty()) closeAt = cap;
      units.push_back({i, i, slices[i].offset, 0});
    }
    Unit& u = units.back();
    u.firstLayer = i;
    u.offset = slices[i].offset;
    u.count += slices[i].count;
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
