#include "base/bytes.hpp"

#include "base/error.hpp"

namespace loom {

void ByteWriter::putBytes(std::span<const std::byte> data) { bytes_.insert(bytes_.end(), data.begin(), data.end()); }

void ByteWriter::putString(std::string_view s) {
  put(static_cast<uint32_t>(s.size()));
  putBytes(std::as_bytes(std::span(s.data(), s.size())));
}

std::span<const std::byte> ByteReader::take(size_t n) {
  if (n > data_.size()) fail("truncated");
  auto out = data_.first(n);
  data_ = data_.subspan(n);
  return out;
}

std::string ByteReader::getString(size_t maxLength) {
  auto length = get<uint32_t>();
  if (length > maxLength) fail("string of " + std::to_string(length) + " bytes exceeds " + std::to_string(maxLength));
  auto bytes = take(length);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void ByteReader::expectEnd() const {
  if (!data_.empty()) fail(std::to_string(data_.size()) + " unexpected trailing bytes");
}

void ByteReader::fail(const std::string& why) const {
  throw Error(loomRemoteError, "malformed " + std::string(what_) + ": " + why);
}

}  // namespace loom
