// A communicator's 128-bit secret: generated with its unique id, presented on
// every bootstrap and data connection, compared in constant time.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace loom {

struct Secret {
  std::array<std::byte, 16> bytes{};

  static Secret random();
  // 32 hex digits; loomInvalidArgument naming `name` (the variable it came from) otherwise.
  static Secret fromHex(std::string_view hex, const char* name);
  std::string toHex() const;
  bool operator==(const Secret& other) const;  // constant time
};

}  // namespace loom
