// Which pages of this process's memory its page tables hold
// (/proc/self/pagemap's "present" bit): a page they lack faults on its
// first touch.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace loom::test {

// Pages of [p, p + bytes) that are not in this process's page tables.
size_t pagesNotMapped(const void* p, size_t bytes);

// The mappings of this process whose file path contains `pathPart`
// (/proc/self/maps), as [start, end) addresses.
struct Mapping {
  const std::byte* start = nullptr;
  size_t bytes = 0;
  std::string path;
};
std::vector<Mapping> mappingsOf(const std::string& pathPart);

}  // namespace loom::test
