#include "tools/loom-diag/gpu.hpp"

#include <algorithm>
#include <cstdio>

#include "base/device/copy_bandwidth.hpp"
#include "base/device/cuda.hpp"
#include "tools/loom-diag/measure.hpp"
#include "tools/loom-diag/statistics.hpp"

namespace loom::diag {
namespace {

using cuda::CopyKind;

constexpr size_t kGpus = kMaxGpusPerNode;
// Gathered per rank: the device count, then per device its two figures, then the pairs' matrix.
constexpr size_t kBlock = 1 + 2 * kGpus + kGpus * kGpus;

}  // namespace

GpuReport measureGpus(loomComm_t comm, int rank, int size, int hostKey, size_t bytes, int iters) {
  std::vector<double> mine(kBlock, 0.0);
  std::string why;
  if (hostKey == rank) {
    const int count = std::min(cuda::deviceCount(), static_cast<int>(kGpus));
    mine[0] = count;
    for (int d = 0; d < count; ++d) {
      const auto h2d = cuda::measureCopy(CopyKind::HostToDevice, d, -1, bytes, iters);
      const auto d2h = cuda::measureCopy(CopyKind::DeviceToHost, d, -1, bytes, iters);
      mine[1 + 2 * static_cast<size_t>(d)] = h2d.GBps;
      mine[2 + 2 * static_cast<size_t>(d)] = d2h.GBps;
      for (int p = 0; p < count; ++p) {
        if (p == d) continue;
        mine[1 + 2 * kGpus + static_cast<size_t>(d) * kGpus + static_cast<size_t>(p)] =
            cuda::measureCopy(CopyKind::DeviceToDevice, d, p, bytes, iters).GBps;
      }
    }
    if (count == 0) why = cuda::measureCopy(CopyKind::HostToDevice, 0, -1, bytes, 1).error;
  }
  std::vector<double> all(kBlock * static_cast<size_t>(size));
  must(loomAllGather(mine.data(), all.data(), kBlock, loomFloat64, comm, nullptr), "loomAllGather", comm);
  if (rank != 0) return {};
  GpuReport report;
  for (int r = 0; r < size; ++r) {
    const double* block = &all[kBlock * static_cast<size_t>(r)];
    const auto count = static_cast<size_t>(block[0]);
    for (size_t d = 0; d < count; ++d) {
      report.gpus.push_back({.node = r,
                             .device = static_cast<int>(d),
                             .hostToDeviceGBps = block[1 + 2 * d],
                             .deviceToHostGBps = block[2 + 2 * d]});
      for (size_t p = 0; p < count; ++p) {
        if (p == d) continue;
        report.pairs.push_back({.node = r,
                                .from = static_cast<int>(d),
                                .to = static_cast<int>(p),
                                .GBps = block[1 + 2 * kGpus + d * kGpus + p]});
      }
    }
  }
  if (report.gpus.empty()) report.none = why.empty() ? "no CUDA device" : why;
  return report;
}

std::vector<Finding> gpuFindings(const GpuReport& report, const Thresholds& t) {
  std::vector<Finding> out;
  const auto holdAgainst = [&](const std::vector<double>& figures, const auto& name, size_t i, const char* what) {
    if (figures.size() < 3) return;  // two say nothing of which is slow
    const double m = median(figures);
    if (figures[i] >= m * (1 - t.minDrop)) return;
    out.push_back({.kind = "gpu",
                   .metric = Metric::Bandwidth,
                   .ranks = {name.node},
                   .measured = figures[i],
                   .against = m,
                   .detail = name.text + " copies " + what + " at " + gbps(figures[i]) + " against a median of " +
                             gbps(m)});
  };
  struct Named {
    int node;
    std::string text;
  };
  std::vector<double> h2d, d2h, d2d;
  for (const auto& g : report.gpus) h2d.push_back(g.hostToDeviceGBps), d2h.push_back(g.deviceToHostGBps);
  for (const auto& p : report.pairs) d2d.push_back(p.GBps);
  for (size_t i = 0; i < report.gpus.size(); ++i) {
    const auto& g = report.gpus[i];
    const Named name{g.node, "GPU " + std::to_string(g.device) + " of rank " + std::to_string(g.node) + "'s host"};
    holdAgainst(h2d, name, i, cuda::copyKindName(CopyKind::HostToDevice));
    holdAgainst(d2h, name, i, cuda::copyKindName(CopyKind::DeviceToHost));
  }
  for (size_t i = 0; i < report.pairs.size(); ++i) {
    const auto& p = report.pairs[i];
    const Named name{p.node, "GPU " + std::to_string(p.from) + " -> GPU " + std::to_string(p.to) + " of rank " +
                                 std::to_string(p.node) + "'s host"};
    holdAgainst(d2d, name, i, cuda::copyKindName(CopyKind::DeviceToDevice));
  }
  return out;
}

}  // namespace loom::diag
