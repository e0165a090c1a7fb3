// The job's 128-bit secret: generated with the unique id, presented on every
// bootstrap connection, compared in constant time.
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
