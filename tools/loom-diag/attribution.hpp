// From a pair matrix to findings: which link, which rank or which node is
// slow. Pairs are compared only with pairs of the same path (shared memory
// with shared memory, sockets with sockets): a pair is slow when it falls
// both below the median of its path by more than `madK` median absolute
// deviations and by more than `minDrop` of the median. The deviations are
// of the bandwidth's logarithm (a fault divides a link's rate, and a few
// pairs a hundred times slower must not widen the spread they are held
// against), scaled to a standard deviation (1.4826 MAD), and used only with
// five or more pairs, where a MAD means something. A rank is slow when most
// of what it sends (or most of what it receives), and at least two pairs of
// it, are slow, or when its sends (receives) as a whole fall below the
// other ranks' by the same rule (each pair of it over the median of its
// path's pairs that do not touch it, the median of those held against the
// ranks'; needed in small jobs, where one rank's pairs are half of them and
// drag the path's median towards their own): the fault is the rank, not
// each of its links. A
// node is slow when all of its two or more ranks are. A slow rank explains
// every slow pair that touches it, either way (a rank starved of its CPU is
// slow in bursts, receiving from all and sending to some); the slow pairs
// that touch no slow rank are slow links.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace loom::diag {

struct PairResult {
  int from = -1;
  int to = -1;
  std::string path;          // the transport from `from` to `to`: "shm", "socket", ...
  double bandwidthGBps = 0;  // one way, from -> to
  double bidirectionalGBps = 0;  // both ways at once, the sum (the lower rank's figure)
  double latencyP50Us = 0;   // half a round trip of 8 bytes (measured once per unordered pair)
  double latencyP99Us = 0;
};

struct Thresholds {
  double madK = 4.0;
  double minDrop = 0.3;
};

struct PathStats {
  std::string path;
  int pairs = 0;
  double medianGBps = 0;
  double madLog = 0;  // of ln(GB/s), scaled to a standard deviation
};

// What a finding's figures are of.
enum class Metric { Bandwidth, Busbw, Latency, None };
// "bandwidth", "busbw", "latency_p50", "": as the JSON names them.
const char* metricName(Metric metric);
// "GB/s", "us", "".
const char* metricUnit(Metric metric);

struct Finding {
  std::string kind;        // "link", "rank", "node", "dead" or "floor" (health_check.hpp)
  Metric metric = Metric::Bandwidth;
  std::vector<int> ranks;  // link, floor of a pair: from, to; rank: the rank; node: its ranks; dead: the failed
  double measured = 0;     // in the metric's unit
  double against = 0;      // the median it was held against, or the floor it should reach
  std::string detail;      // a sentence for the report
};

struct Attribution {
  std::vector<PathStats> paths;
  std::vector<bool> slow;  // per pair, in the order given
  std::vector<Finding> findings;
};

// `hostOf[r]`: an id shared by exactly the ranks of r's host. Findings of
// kind link, rank and node.
Attribution attribute(std::span<const PairResult> pairs, std::span<const int> hostOf, const Thresholds& thresholds);

}  // namespace loom::diag
