// The tuner's cost model, which every algorithm's cost function uses:
//
//   time = steps x latency + bytes through this rank's busiest link / bandwidth
//          (+ bytes folded after the exchange / fold bandwidth)
//
// with the latency and bandwidth of the path the algorithm crosses: shared
// memory within a node, sockets across nodes, or the node's shared segment.
// Every rank computes the same estimate from the same inputs (the layout and
// the bytes), which is what keeps their choices in step.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

namespace loom::coll {

struct Layout {
  int nranks = 1;
  int nodes = 1;              // distinct hosts among the ranks
  bool sharedMemory = false;  // one node, and LOOM_TRANSPORT does not rule shared memory out
  int ranksPerNode = 0;       // ranks on each node if all have as many and may share memory, else 0
};

struct Path {
  double latencyUs;
  double bandwidthGBps;
};

struct CostModel {
  // Shared memory: one slot hand-off measured at 0.96 us and about 8 GB/s
  // single-thread copy (bench/p2p); sockets: a blocking hand-off costs 20-35
  // us across cores and one TCP stream moves about 1.8 GB/s between
  // namespaces (docs/point-to-point.md).
  static constexpr Path kShmPath{1.0, 8.0};
  static constexpr Path kSocketPath{30.0, 1.5};
  // The shared segment: a step's synchronization is a flag seen through the
  // cache, about 0.1 us across cores; the data is staged once and read back
  // from the cache, at about memcpy speed (10 GB/s).
  static constexpr Path kSegmentPath{0.2, 10.0};
  // Posting one more concurrent message costs a fraction of a hand-off.
  static constexpr double kPerPeerFraction = 0.3;
  // Recursive doubling and direct receive whole buffers and fold them after
  // the exchange, where the ring and the trees fold each chunk out of the FIFO
  // while the next one travels. So the former pay their folding on top: the
  // bytes it reads, at about memcpy speed. (Across two namespaces with 2 ranks
  // the ring took 0.7x rd's time at 4-16 MiB with the same bytes on the wire.)
  static constexpr double kFoldGBps = 10.0;

  Layout layout;

  double n() const { return layout.nranks; }
  // The point-to-point links' path.
  Path path() const { return layout.sharedMemory ? kShmPath : kSocketPath; }
  // An algorithm over point-to-point links.
  double overLinks(double steps, double moved, double folded = 0) const {
    const Path p = path();
    return steps * p.latencyUs + moved / (p.bandwidthGBps * 1e3) + folded / (kFoldGBps * 1e3);
  }
  // An algorithm on the node's shared segment.
  static double onSegment(double steps, double staged) {
    return steps * kSegmentPath.latencyUs + staged / (kSegmentPath.bandwidthGBps * 1e3);
  }
  // An algorithm on one node's shared segment: `steps` synchronizations per
  // slot-sized piece, `staged` bytes staged once (kShmPath's figure covers
  // both copies); infinity unless every rank shares the node and may use it.
  double onSharedNode(double steps, double staged) const {
    return layout.sharedMemory ? onSegment(steps, staged) : std::numeric_limits<double>::infinity();
  }
  // A hierarchical algorithm: the node phases' `nodePhasesUs`, and `passes`
  // rings across the nodes, in each of which every rank of a node carries
  // 1/ranksPerNode of the buffer over the node's link; infinity unless the
  // nodes are two or more of the same two or more ranks.
  double acrossUniformNodes(double passes, double nodePhasesUs, size_t bytes) const {
    if (layout.nodes < 2 || layout.ranksPerNode < 2) return std::numeric_limits<double>::infinity();
    const double h = layout.nodes;
    const double s = static_cast<double>(bytes);
    const Path p = path();
    return nodePhasesUs + passes * ((h - 1) * p.latencyUs + (h - 1) / h * s / (p.bandwidthGBps * 1e3));
  }
  // ceil(log2 n), 0 for one rank.
  static double log2Ceil(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n))); }
};

}  // namespace loom::coll
