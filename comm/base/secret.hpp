// A communicator's 128-bit secret: generated with its unique id, presented on
// every bootstrap and data connection, compared in constant time.
#pragma once

#include <array>
#include <cstddef>

namespace loom {

struct Secret {
  std::array<std::byte, 16> bytes{};

  static Secret random();
  bool operator==(const Secret& other) const;  // constant time
};

}  // namespace loom
