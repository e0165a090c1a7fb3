// SHA-256 (FIPS 180-4), for loom-train's params_sha256: one fingerprint of
// the final parameters that every rank and every mode can compare.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace loom::train {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> data);
  // The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hex();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes
};

}  // namespace loom::train
