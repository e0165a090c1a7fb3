// Lists of integers the way people write them: "0-3,7".
#pragma once

#include <string>
#include <vector>

namespace loom {

// `sorted` ascending; consecutive runs are collapsed to first-last.
std::string formatRanges(const std::vector<int>& sorted);

}  // namespace loom
