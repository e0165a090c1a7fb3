#include "base/secret.hpp"

#include "base/error.hpp"
#include "base/random.hpp"

namespace loom {

Secret Secret::random() {
  Secret s;
  fillRandom(s.bytes);
  return s;
}

Secret Secret::fromHex(std::string_view hex, const char* name) {
  const auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Secret s;
  bool valid = hex.size() == 2 * s.bytes.size();
  for (size_t i = 0; valid && i < s.bytes.size(); ++i) {
    const int high = digit(hex[2 * i]);
    const int low = digit(hex[2 * i + 1]);
    valid = high >= 0 && low >= 0;
    s.bytes[i] = static_cast<std::byte>(high << 4 | low);
  }
  if (!valid) {
    throw Error(loomInvalidArgument, std::string(name) + " must be 32 hex digits (128 random bits, e.g. from "
                                                         "'head -c16 /dev/urandom | xxd -p')");
  }
  return s;
}

std::string Secret::toHex() const {
  constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (std::byte b : bytes) {
    hex += kDigits[static_cast<unsigned>(b) >> 4];
    hex += kDigits[static_cast<unsigned>(b) & 0xf];
  }
  return hex;
}

bool Secret::operator==(const Secret& other) const {
  std::byte diff{0};
  for (size_t i = 0; i < bytes.size(); ++i) diff |= bytes[i] ^ other.bytes[i];
  return diff == std::byte{0};
}

}  // namespace loom
