// The few statistics loom-diag's measurements, rules and reports share.
#pragma once

#include <string>
#include <vector>

namespace loom::diag {

// The middle value (the mean of the two middle ones for an even count); 0 for none.
double median(std::vector<double> values);

// The value at fraction q (0..1) of the sorted values, nearest rank; `values` not empty.
double percentile(std::vector<double> values, double q);

// "1.23 GB/s": three significant digits, as the findings print figures.
std::string gbps(double gigabytesPerSecond);

}  // namespace loom::diag
