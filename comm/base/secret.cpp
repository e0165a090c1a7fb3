#include "comm/base/secret.hpp"

#include "comm/base/random.hpp"

namespace loom {

Secret Secret::random() {
  Secret s;
  fillRandom(s.bytes);
  return s;
}

bool Secret::operator==(const Secret& other) const {
  std::byte diff{0};
  for (size_t i = 0; i < bytes.size(); ++i) diff |= bytes[i] ^ other.bytes[i];
  return diff == std::byte{0};
}

}  // namespace loom
