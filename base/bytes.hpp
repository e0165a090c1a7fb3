// Bounds-checked serialization for every message Loom sends out of band
// (bootstrap, stores, connection handshakes). A reader that runs past its
// input throws loomRemoteError ("truncated"), so a malformed message can
// never read out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace loom {

class ByteWriter {
 public:
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void put(const T& value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void putBytes(std::span<const std::byte> data);
  void putString(std::string_view s);  // u32 length + bytes
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

class ByteReader {
 public:
  ByteReader(std::span<const std::byte> data, std::string_view what) : data_(data), what_(what) {}

  template <class T>
    requires std::is_trivially_copyable_v<T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)).data(), sizeof(T));
    return value;
  }
  std::span<const std::byte> take(size_t n);
  std::string getString(size_t maxLength);
  size_t remaining() const { return data_.size(); }
  // Throws unless everything was consumed: trailing bytes mean a malformed message.
  void expectEnd() const;

 private:
  [[noreturn]] void fail(const std::string& why) const;
  std::span<const std::byte> data_;
  std::string_view what_;
};

}  // namespace loom
