#include "collectives/algorithms/registry.hpp"

#include <algorithm>
#include <array>
#include <vector>

namespace loom::coll {

// Defined in the algorithm files, one per collective each implements.
extern const AlgorithmEntry kRingAllReduce, kRingAllGather, kRingReduceScatter, kChainBroadcast, kChainReduce;
extern const AlgorithmEntry kRecursiveDoublingAllReduce;
extern const AlgorithmEntry kDirectAllGather, kDirectAlltoAll, kDirectGather, kDirectScatter, kDirectAllReduce,
    kDirectReduceScatter, kDirectReduce;
extern const AlgorithmEntry kShmAllReduce, kShmAllGather, kShmReduceScatter, kShmBroadcast, kShmReduce, kShmAlltoAll,
    kShmGather, kShmScatter;
extern const AlgorithmEntry kTreeAllReduce;
extern const AlgorithmEntry kHierarchicalAllReduce, kHierarchicalAllGather, kHierarchicalReduceScatter;

namespace {

// The tuner keeps the first of equal estimates, so the order matters.
constexpr std::array kEntries = {
    &kRingAllReduce,   &kRingAllGather,   &kRingReduceScatter,      &kChainBroadcast,        &kChainReduce,
    &kRecursiveDoublingAllReduce,
    &kDirectAllGather, &kDirectAlltoAll,  &kDirectGather,           &kDirectScatter,         &kDirectAllReduce,
    &kDirectReduceScatter,                &kDirectReduce,
    &kShmAllReduce,    &kShmAllGather,    &kShmReduceScatter,       &kShmBroadcast,          &kShmReduce,
    &kShmAlltoAll,     &kShmGather,       &kShmScatter,
    &kTreeAllReduce,
    &kHierarchicalAllReduce,              &kHierarchicalAllGather,  &kHierarchicalReduceScatter,
};

}  // namespace

std::span<const AlgorithmEntry* const> algorithms() { return kEntries; }

const AlgorithmEntry* findAlgorithm(std::string_view name, CollectiveKind kind) {
  for (const AlgorithmEntry* entry : kEntries) {
    if (entry->kind == kind && name == entry->name) return entry;
  }
  return nullptr;
}

bool isAlgorithmName(std::string_view name) {
  for (const AlgorithmEntry* entry : kEntries) {
    if (name == entry->name) return true;
  }
  return false;
}

std::string algorithmNames() {
  std::vector<std::string_view> seen;
  std::string names;
  for (const AlgorithmEntry* entry : kEntries) {
    if (std::find(seen.begin(), seen.end(), entry->name) != seen.end()) continue;
    seen.emplace_back(entry->name);
    names += (names.empty() ? "" : ", ") + std::string(entry->name);
  }
  return names;
}

}  // namespace loom::coll
