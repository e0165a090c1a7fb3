#include "base/random.hpp"

#include <sys/random.h>

#include <cerrno>

#include "base/error.hpp"

namespace loom {

void fillRandom(std::span<std::byte> out) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throwSystemError("getrandom", errno);
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace loom
