#include "tests/support/page_map.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace loom::test {

size_t pagesNotMapped(const void* p, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(p) / page;
  const auto last = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open /proc/self/pagemap");
  size_t missing = 0;
  for (uintptr_t i = first; i < last; ++i) {
    uint64_t entry = 0;
    if (::pread(fd, &entry, sizeof entry, static_cast<off_t>(i * sizeof entry)) != sizeof entry) {
      ::close(fd);
      throw std::runtime_error("cannot read /proc/self/pagemap");
    }
    if ((entry >> 63) == 0) ++missing;  // bit 63: the page is present
  }
  ::close(fd);
  return missing;
}

std::vector<Mapping> mappingsOf(const std::string& pathPart) {
  std::ifstream maps("/proc/self/maps");
  std::vector<Mapping> found;
  for (std::string line; std::getline(maps, line);) {
    if (line.find(pathPart) == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, path;
    fields >> range >> perms >> offset >> dev >> inode >> path;
    const size_t dash = range.find('-');
    const uintptr_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    found.push_back({reinterpret_cast<const std::byte*>(start), end - start, path});
  }
  return found;
}

}  // namespace loom::test
