#include "comm/bootstrap/unique_id.hpp"

#include <cstring>
#include <string>

#include "base/error.hpp"

namespace loom {
namespace {

// Layout: magic u32 | version u16 | address length u16 | secret 16 B |
// address text (up to 96 B) | zero padding | FNV-1a-64 of bytes [0, 120).
constexpr uint32_t kIdMagic = 0x44494d4c;  // "LMID"
constexpr uint16_t kIdVersion = 1;
constexpr size_t kAddressOffset = 24;
constexpr size_t kChecksumOffset = LOOM_UNIQUE_ID_BYTES - 8;
constexpr size_t kMaxAddress = kChecksumOffset - kAddressOffset;

uint64_t fnv1a(const char* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

loomUniqueId encodeUniqueId(const UniqueIdData& data) {
  loomUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::string address = data.root.toString();
  if (address.size() > kMaxAddress) throw Error(loomInternalError, "root address too long for a unique id");
  auto length = static_cast<uint16_t>(address.size());
  std::memcpy(id.internal, &kIdMagic, 4);
  std::memcpy(id.internal + 4, &kIdVersion, 2);
  std::memcpy(id.internal + 6, &length, 2);
  std::memcpy(id.internal + 8, data.secret.bytes.data(), 16);
  std::memcpy(id.internal + kAddressOffset, address.data(), address.size());
  uint64_t sum = fnv1a(id.internal, kChecksumOffset);
  std::memcpy(id.internal + kChecksumOffset, &sum, 8);
  return id;
}

UniqueIdData decodeUniqueId(const loomUniqueId& id) {
  uint32_t magic;
  uint16_t version, length;
  uint64_t sum;
  std::memcpy(&magic, id.internal, 4);
  std::memcpy(&version, id.internal + 4, 2);
  std::memcpy(&length, id.internal + 6, 2);
  std::memcpy(&sum, id.internal + kChecksumOffset, 8);
  if (magic != kIdMagic || version != kIdVersion || length == 0 || length > kMaxAddress ||
      sum != fnv1a(id.internal, kChecksumOffset)) {
    throw Error(loomInvalidArgument,
                "commId is not a valid unique id (bad magic, version or checksum): pass the bytes of "
                "loomGetUniqueId unchanged");
  }
  UniqueIdData data;
  std::memcpy(data.secret.bytes.data(), id.internal + 8, 16);
  data.root = net::SocketAddress::parse(std::string(id.internal + kAddressOffset, length));
  return data;
}

}  // namespace loom
