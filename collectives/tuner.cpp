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

// The constants of each path. Shared memory: one slot hand-off measured at
// 0.96 us and about 8 GB/s single-thread copy (bench/p2p); sockets: a
// blocking hand-off costs 20-35 us across cores and one TCP stream moves
// about 1.8 GB/s between namespaces (README, "Point-to-point").
struct Path {
  double latencyUs;
  double bandwidthGBps;
};
constexpr Path kShmPath{1.0, 8.0};
constexpr Path kSocketPath{30.0, 1.5};
// The shared segment: a step's synchronization is a flag seen through the
// cache, about 0.1 us across cores; the data is staged once and read back
// from the cache, at about memcpy speed (10 GB/s).
constexpr Path kSegmentPath{0.2, 10.0};
// Posting one more concurrent message costs a fraction of a hand-off.
constexpr double kPerPeerFraction = 0.3;
// Recursive doubling and direct receive whole buffers and fold them after
// the exchange, where the ring and the trees fold each chunk out of the FIFO
// while the next one travels. So the former pay their folding on top: the
// bytes it reads, at about memcpy speed. (Across two namespaces with 2 ranks
// the ring took 0.7x rd's time at 4-16 MiB with the same bytes on the wire.)
constexpr double kFoldGBps = 10.0;

constexpr size_t kDefaultChunk = 4u << 20;
// The shared segment's slot: each step's working set, (ranks + 1) slots,
// stays in the last-level cache (32-36 MiB on the project's VMs, with 1-2 MiB
// of L2 per core), so what is staged is reduced and copied out before it
// reaches memory.
constexpr size_t kDefaultSlot = 256u << 10;
constexpr size_t kMaxSlot = 16u << 20;

constexpr const char* kAlgorithmNames[kAlgorithms] = {"ring", "rd", "direct", "shm", "tree", "hier"};

std::string algorithmList() {
  std::string list;
  for (const char* name : kAlgorithmNames) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

bool reducesData(CollectiveKind kind) {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::Reduce || kind == CollectiveKind::ReduceScatter;
}

double log2Ceil(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n))); }

std::optional<Algorithm> parseAlgorithm(const std::string& name) {
  for (int a = 0; a < kAlgorithms; ++a) {
    if (name == kAlgorithmNames[a]) return static_cast<Algorithm>(a);
  }
  return std::nullopt;
}

std::optional<CollectiveKind> parseCollective(const std::string& name) {
  for (int k = 0; k < kCollectiveKinds; ++k) {
    if (name == collectiveName(static_cast<CollectiveKind>(k))) return static_cast<CollectiveKind>(k);
  }
  return std::nullopt;
}

}  // namespace

const char* algorithmName(Algorithm algorithm) { return kAlgorithmNames[static_cast<int>(algorithm)]; }

bool applies(Algorithm algorithm, CollectiveKind kind) {
  switch (algorithm) {
    case Algorithm::Ring:
      return kind == CollectiveKind::AllReduce || kind == CollectiveKind::AllGather ||
             kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::Broadcast ||
             kind == CollectiveKind::Reduce;
    case Algorithm::RecursiveDoubling:
    case Algorithm::Tree:
      return kind == CollectiveKind::AllReduce;
    case Algorithm::Hierarchical:
      return kind == CollectiveKind::AllReduce || kind == CollectiveKind::AllGather ||
             kind == CollectiveKind::ReduceScatter;
    case Algorithm::Direct: return kind != CollectiveKind::Broadcast;
    case Algorithm::Shm:
      return kind == CollectiveKind::AllReduce || kind == CollectiveKind::AllGather ||
             kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::Broadcast ||
             kind == CollectiveKind::Reduce;
  }
  return false;
}

bool foldsInRankOrder(Algorithm algorithm) { return algorithm == Algorithm::Direct || algorithm == Algorithm::Shm; }

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
    auto algorithm = parseAlgorithm(name);
    if (!algorithm) {
      throw Error(loomInvalidArgument, "LOOM_ALGO: '" + name + "' is not an algorithm (" + algorithmList() + ")");
    }
    if (colon == std::string::npos) {  // one name: every collective it applies to
      for (int k = 0; k < kCollectiveKinds; ++k) {
        if (applies(*algorithm, static_cast<CollectiveKind>(k))) o.algorithm[static_cast<size_t>(k)] = algorithm;
      }
      continue;
    }
    auto kind = parseCollective(entry.substr(0, colon));
    if (!kind) {
      throw Error(loomInvalidArgument, "LOOM_ALGO: '" + entry.substr(0, colon) +
                                           "' is not a collective (allreduce, allgather, reducescatter, broadcast, "
                                           "reduce, alltoall, gather, scatter)");
    }
    if (!applies(*algorithm, *kind)) {
      throw Error(loomInvalidArgument, std::string("LOOM_ALGO: ") + name + " does not implement " + collectiveName(*kind));
    }
    o.algorithm[static_cast<size_t>(*kind)] = algorithm;
  }
  return o;
}

Tuner::Tuner(Layout layout, Overrides overrides) : layout_(layout), overrides_(overrides) {}

double Tuner::estimateUs(Algorithm algorithm, CollectiveKind kind, size_t bytes) const {
  const Path path = layout_.sharedMemory ? kShmPath : kSocketPath;
  const double n = layout_.nranks;
  const double s = static_cast<double>(bytes);
  double steps = 0;
  double moved = 0;   // bytes through this rank's slowest link
  double folded = 0;  // bytes read by a fold that waits for the whole exchange
  switch (algorithm) {
    case Algorithm::Ring:
      if (kind == CollectiveKind::AllReduce) {
        steps = 2 * (n - 1);
        moved = 2 * (n - 1) / n * s;
      } else if (kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce) {
        steps = n - 1;  // filling the pipeline
        moved = s;
      } else {  // all-gather and reduce-scatter: bytes is the whole n-block buffer
        steps = n - 1;
        moved = (n - 1) / n * s;
      }
      break;
    case Algorithm::RecursiveDoubling: {
      const bool powerOfTwo = std::has_single_bit(static_cast<unsigned>(layout_.nranks));
      steps = log2Ceil(layout_.nranks) + (powerOfTwo ? 0 : 2);
      moved = steps * s;
      folded = 2 * log2Ceil(layout_.nranks) * s;  // each exchange: ours and theirs
      break;
    }
    case Algorithm::Hierarchical: {
      if (layout_.nodes < 2 || layout_.ranksPerNode < 2) return std::numeric_limits<double>::infinity();
      // All-reduce: a reduce-scatter and an all-gather on each node's
      // segment, and between them a ring across the nodes in which each of a
      // node's ranks carries 1/ranksPerNode of the buffer, all of them over
      // the node's link. All-gather: the ring across nodes, then one gather
      // on the segment. The node phases' fixed cost is what was measured
      // across two namespaces with 2 ranks each (bench/RESULTS.md): about
      // three socket hand-offs for the all-reduce (whose tail also takes the
      // flat ring), so the flat algorithms keep its messages below ~128 KiB;
      // the all-gather's one gather adds little to its ring (0.84 of the flat
      // ring's time at 16 KiB, 0.53-0.75 at 256 KiB-16 MiB).
      const double h = layout_.nodes;
      const bool allReduce = kind == CollectiveKind::AllReduce;
      const double passes = allReduce ? 2 : 1;
      const double segment = (allReduce ? 3 * path.latencyUs : kSegmentPath.latencyUs) +
                             passes * s / (kSegmentPath.bandwidthGBps * 1e3);
      return segment + passes * ((h - 1) * path.latencyUs + (h - 1) / h * s / (path.bandwidthGBps * 1e3));
    }
    case Algorithm::Tree:
      // Up and down a tree of depth log2(n); a rank inner in one tree takes
      // in (and sends on) about the whole buffer in each direction.
      steps = 2 * log2Ceil(layout_.nranks);
      moved = 2 * s;
      break;
    case Algorithm::Direct:
      steps = 1 + kPerPeerFraction * (n - 1);
      if (kind == CollectiveKind::AllReduce) {  // a reduce-scatter, then an all-gather
        steps *= 2;
        moved = 2 * (n - 1) / n * s;
        folded = s;  // n slices of s / n
      } else if (kind == CollectiveKind::Reduce) {  // the root receives everything
        moved = (n - 1) * s;
        folded = n * s;
      } else {
        moved = (n - 1) / n * s;
        folded = kind == CollectiveKind::ReduceScatter ? s : 0;  // n blocks of s / n
      }
      break;
    case Algorithm::Shm: {
      if (!layout_.sharedMemory) return std::numeric_limits<double>::infinity();
      const bool reduces = kind == CollectiveKind::AllReduce || kind == CollectiveKind::Reduce;
      steps = reduces ? 2 : 1;  // per slot-sized piece: arrive, and for reductions the result slice
      // Staged once, like one point-to-point transfer (kShmPath's figure
      // covers both copies); all-gather and reduce-scatter stage the blocks
      // that others use.
      const bool blocks = kind == CollectiveKind::AllGather || kind == CollectiveKind::ReduceScatter;
      moved = blocks ? (n - 1) / n * s : s;
      return steps * kSegmentPath.latencyUs + moved / (kSegmentPath.bandwidthGBps * 1e3);
    }
  }
  return steps * path.latencyUs + moved / (path.bandwidthGBps * 1e3) + folded / (kFoldGBps * 1e3);
}

size_t Tuner::segmentSlotBytes() const {
  return overrides_.chunkBytes != 0 ? std::min(overrides_.chunkBytes, kMaxSlot) : kDefaultSlot;
}

Choice Tuner::choose(CollectiveKind kind, size_t bytes) {
  Last& last = last_[static_cast<size_t>(kind)];
  if (last.bytes == bytes) return last.choice;
  last = {bytes, decide(kind, bytes)};
  return last.choice;
}

Choice Tuner::decide(CollectiveKind kind, size_t bytes) {
  Choice choice;
  const char* why = "LOOM_ALGO";
  if (auto forced = overrides_.algorithm[static_cast<size_t>(kind)]) {
    if (*forced == Algorithm::Shm && !layout_.sharedMemory) {
      throw Error(loomInvalidArgument, std::string("LOOM_ALGO: shm needs every rank on one node with shared memory "
                                                   "allowed, but ") + collectiveName(kind) + " runs on " +
                                           std::to_string(layout_.nodes) + " nodes" +
                                           (layout_.nodes == 1 ? " with LOOM_TRANSPORT=socket" : ""));
    }
    if (overrides_.deterministic && reducesData(kind) && !foldsInRankOrder(*forced)) {
      throw Error(loomInvalidArgument, std::string("LOOM_ALGO: ") + algorithmName(*forced) + " does not fold " +
                                           collectiveName(kind) +
                                           " in rank order, which " + overrides_.deterministicBy +
                                           " asks for (shm and direct do)");
    }
    choice.algorithm = *forced;
  } else {
    why = "cost model";
    double best = std::numeric_limits<double>::infinity();
    for (int a = 0; a < kAlgorithms; ++a) {
      const auto algorithm = static_cast<Algorithm>(a);
      if (!applies(algorithm, kind)) continue;
      if (overrides_.deterministic && reducesData(kind) && !foldsInRankOrder(algorithm)) continue;
      const double t = estimateUs(algorithm, kind, bytes);
      if (t < best) {
        best = t;
        choice.algorithm = algorithm;
      }
    }
  }
  if (choice.algorithm == Algorithm::Shm) {
    choice.chunkBytes = segmentSlotBytes();
  } else {
    choice.chunkBytes = overrides_.chunkBytes != 0 ? overrides_.chunkBytes : kDefaultChunk;
  }
  const int sizeClass = bytes == 0 ? -1 : std::bit_width(bytes) - 1;
  if (logged_.emplace(static_cast<int>(kind), sizeClass).second) {
    LOOM_INFO(Tuning, "%s of %zu bytes (size class 2^%d) on %d ranks, %d nodes: %s, chunk %zu bytes (%s)",
              collectiveName(kind), bytes, sizeClass, layout_.nranks, layout_.nodes, algorithmName(choice.algorithm),
              choice.chunkBytes, why);
  }
  return choice;
}

}  // namespace loom::coll
