#include "collectives/tuner.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

#include "base/env.hpp"
#include "base/error.hpp"
#include "base/log.hpp"

namespace loom::coll {
namespace {

constexpr size_t kDefaultChunk = 4u << 20;
// The shared segment's slot: each step's working set, (ranks + 1) slots,
// stays in the last-level cache (32-36 MiB on the project's VMs, with 1-2 MiB
// of L2 per core), so what is staged is reduced and copied out before it
// reaches memory.
constexpr size_t kDefaultSlot = 256u << 10;
constexpr size_t kMaxSlot = 16u << 20;

// The names of the algorithms that fold reductions in rank order: "direct and shm".
std::string rankOrderNames() {
  std::string names;
  for (const AlgorithmEntry* entry : algorithms()) {
    if (!entry->foldsInRankOrder || entry->kind != CollectiveKind::AllReduce) continue;
    names += (names.empty() ? "" : " and ") + std::string(entry->name);
  }
  return names;
}

bool reducesData(CollectiveKind kind) {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::Reduce || kind == CollectiveKind::ReduceScatter;
}

std::optional<CollectiveKind> parseCollective(const std::string& name) {
  for (int k = 0; k < kCollectiveKinds; ++k) {
    if (name == collectiveName(static_cast<CollectiveKind>(k))) return static_cast<CollectiveKind>(k);
  }
  return std::nullopt;
}

}  // namespace

Overrides Overrides::fromEnv() {
  Overrides o;
  if (auto chunk = env::getIfSet("LOOM_CHUNKSIZE")) {
    o.chunkBytes = static_cast<size_t>(env::getInt("LOOM_CHUNKSIZE", 64, 1ll << 30));
    if (o.chunkBytes % 64 != 0) {
      throw Error(loomInvalidArgument, "LOOM_CHUNKSIZE='" + *chunk + "' is not a multiple of 64");
    }
  }
  auto text = env::getIfSet("LOOM_ALGO");
  if (!text) return o;
  std::stringstream entries(*text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    const auto colon = entry.find(':');
    const std::string name = colon == std::string::npos ? entry : entry.substr(colon + 1);
    if (!isAlgorithmName(name)) {
      throw Error(loomInvalidArgument, "LOOM_ALGO: '" + name + "' is not an algorithm (" + algorithmNames() + ")");
    }
    if (colon == std::string::npos) {  // one name: every collective it implements
      for (int k = 0; k < kCollectiveKinds; ++k) {
        const auto kind = static_cast<CollectiveKind>(k);
        if (const AlgorithmEntry* implemented = findAlgorithm(name, kind)) o.algorithm[static_cast<size_t>(k)] = implemented;
      }
      continue;
    }
    auto kind = parseCollective(entry.substr(0, colon));
    if (!kind) {
      throw Error(loomInvalidArgument, "LOOM_ALGO: '" + entry.substr(0, colon) +
                                           "' is not a collective (allreduce, allgather, reducescatter, broadcast, "
                                           "reduce, alltoall, gather, scatter)");
    }
    const AlgorithmEntry* chosen = findAlgorithm(name, *kind);
    if (chosen == nullptr) {
      throw Error(loomInvalidArgument, std::string("LOOM_ALGO: ") + name + " does not implement " + collectiveName(*kind));
    }
    o.algorithm[static_cast<size_t>(*kind)] = chosen;
  }
  return o;
}

Tuner::Tuner(Layout layout, Overrides overrides) : model_{.layout = layout}, overrides_(overrides) {}

double Tuner::estimateUs(const AlgorithmEntry& algorithm, size_t bytes) const { return algorithm.costUs(model_, bytes); }

size_t Tuner::segmentSlotBytes() const {
  return overrides_.chunkBytes != 0 ? std::min(overrides_.chunkBytes, kMaxSlot) : kDefaultSlot;
}

Choice Tuner::choose(CollectiveKind kind, size_t bytes, const Executor& executor) {
  Last& last = last_[static_cast<size_t>(kind)];
  if (last.bytes == bytes && last.executor == &executor) return last.choice;
  last = {bytes, &executor, decide(kind, bytes, executor)};
  return last.choice;
}

Choice Tuner::decide(CollectiveKind kind, size_t bytes, const Executor& executor) {
  const Layout& layout = model_.layout;
  Choice choice;
  const char* why = "LOOM_ALGO";
  if (const AlgorithmEntry* forced = overrides_.algorithm[static_cast<size_t>(kind)]) {
    if (forced->needs == Needs::NodeSegment && !layout.sharedMemory) {
      throw Error(loomInvalidArgument, std::string("LOOM_ALGO: ") + forced->name +
                                           " needs every rank on one node with shared memory allowed, but " +
                                           collectiveName(kind) + " runs on " + std::to_string(layout.nodes) +
                                           " nodes" + (layout.nodes == 1 ? " with LOOM_TRANSPORT=socket" : ""));
    }
    if (forced->hostOnly() && !executor.isHost()) {
      throw Error(loomInvalidArgument, std::string("LOOM_ALGO: ") + forced->name +
                                           " runs on host memory only (the node segment), but this " +
                                           collectiveName(kind) + "'s buffers are run by the " + executor.name() +
                                           " executor");
    }
    if (overrides_.deterministic && reducesData(kind) && !forced->foldsInRankOrder) {
      throw Error(loomInvalidArgument, std::string("LOOM_ALGO: ") + forced->name + " does not fold " +
                                           collectiveName(kind) + " in rank order, which " +
                                           overrides_.deterministicBy + " asks for (" + rankOrderNames() + " do)");
    }
    choice.algorithm = forced;
  } else {
    why = "cost model";
    double best = std::numeric_limits<double>::infinity();
    for (const AlgorithmEntry* algorithm : algorithms()) {
      if (algorithm->kind != kind) continue;
      if (algorithm->hostOnly() && !executor.isHost()) continue;
      if (overrides_.deterministic && reducesData(kind) && !algorithm->foldsInRankOrder) continue;
      const double t = estimateUs(*algorithm, bytes);
      if (t < best || choice.algorithm == nullptr) {
        best = t;
        choice.algorithm = algorithm;
      }
    }
  }
  if (choice.algorithm->needs == Needs::NodeSegment) {
    choice.chunkBytes = segmentSlotBytes();
  } else {
    choice.chunkBytes = overrides_.chunkBytes != 0 ? overrides_.chunkBytes : kDefaultChunk;
  }
  const int sizeClass = bytes == 0 ? -1 : std::bit_width(bytes) - 1;
  if (logged_.emplace(static_cast<int>(kind), sizeClass).second) {
    LOOM_INFO(Tuning, "%s of %zu bytes (size class 2^%d) on %d ranks, %d nodes: %s, chunk %zu bytes (%s)",
              collectiveName(kind), bytes, sizeClass, layout.nranks, layout.nodes, choice.algorithm->name,
              choice.chunkBytes, why);
  }
  return choice;
}

}  // namespace loom::coll
