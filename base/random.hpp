// Cryptographically random bytes from the kernel, for job secrets and names.
#pragma once

#include <cstddef>
#include <span>

namespace loom {

void fillRandom(std::span<std::byte> out);

}  // namespace loom
