#include "tools/loom-diag/statistics.hpp"

#include <algorithm>
#include <cstdio>

namespace loom::diag {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const auto at = static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

std::string gbps(double gigabytesPerSecond) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GB/s", gigabytesPerSecond);
  return text;
}

}  // namespace loom::diag
