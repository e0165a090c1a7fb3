#include "collectives/shm/pull_copy.hpp"

#include <algorithm>
#include <cstring>

namespace loom::coll::shm {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kLine = 64;

}  // namespace

void pullCopy(std::byte* dst, const std::byte* src, size_t bytes) {
  for (size_t done = 0; done < bytes; done += kPage) {
    const size_t n = std::min(kPage, bytes - done);
    for (size_t line = 0; line < n; line += kLine) __builtin_prefetch(src + done + line);
    std::memcpy(dst + done, src + done, n);
  }
}

}  // namespace loom::coll::shm
