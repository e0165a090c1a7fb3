// GPU copy matrices (nvbandwidth's): the lowest rank of each host measures
// every GPU its process sees, host->device and device->host from pinned
// memory and device->device for every ordered pair (base/device's
// measureCopy), and rank 0 gathers them. Each GPU's figures are held
// against the median of every GPU of the job, each pair's against the
// median of the pairs, by the pairs' rule (--min-drop, with three or more):
// a GPU on a degraded PCIe link, or a pair whose NVLink is down, is named.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <string>
#include <vector>

#include "tools/loom-diag/attribution.hpp"

namespace loom::diag {

struct GpuFigures {
  int node = -1;    // the rank that measured it: its host's lowest
  int device = -1;  // as that process numbers its devices
  double hostToDeviceGBps = 0;
  double deviceToHostGBps = 0;
};

struct GpuPair {
  int node = -1;
  int from = -1;
  int to = -1;
  double GBps = 0;
};

struct GpuReport {
  std::vector<GpuFigures> gpus;
  std::vector<GpuPair> pairs;
  std::string none;  // why there are no figures ("no CUDA device"), when there are none
};

// The most GPUs one host reports.
inline constexpr int kMaxGpusPerNode = 16;

// Every rank calls it; rank 0 gets the job's figures, the others nothing.
// Throws Failure when a Loom call fails.
GpuReport measureGpus(loomComm_t comm, int rank, int size, int hostKey, size_t bytes, int iters);

// Findings of kind "gpu": ranks {node}, the figure and the median it fell below.
std::vector<Finding> gpuFindings(const GpuReport& report, const Thresholds& thresholds);

}  // namespace loom::diag
