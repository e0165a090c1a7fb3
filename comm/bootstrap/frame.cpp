#include "comm/bootstrap/frame.hpp"

#include "comm/base/error.hpp"
#include "comm/base/bytes.hpp"

namespace loom {
namespace {
constexpr uint32_t kMagic = 0x534d4c4c;  // "LLMS"
constexpr uint16_t kVersion = 1;
}  // namespace

FrameHeader parseFrameHeader(std::span<const std::byte, kFrameHeaderBytes> raw, const Secret& secret,
                             uint32_t maxLength) {
  ByteReader r(raw, "bootstrap frame header");
  if (r.get<uint32_t>() != kMagic) throw Error(loomRemoteError, "bootstrap frame has a bad magic number");
  if (r.get<uint16_t>() != kVersion) throw Error(loomRemoteError, "bootstrap frame has an unsupported version");
  auto type = r.get<uint16_t>();
  Secret presented;
  auto s = r.take(presented.bytes.size());
  std::copy(s.begin(), s.end(), presented.bytes.begin());
  if (!(presented == secret)) throw Error(loomRemoteError, "bootstrap frame carries the wrong secret");
  auto length = r.get<uint32_t>();
  if (type < static_cast<uint16_t>(FrameType::Hello) || type > static_cast<uint16_t>(FrameType::StoreReply)) {
    throw Error(loomRemoteError, "bootstrap frame has unknown type " + std::to_string(type));
  }
  if (length > maxLength) {
    throw Error(loomRemoteError, "bootstrap frame of " + std::to_string(length) + " bytes exceeds the limit of " +
                                     std::to_string(maxLength));
  }
  return {static_cast<FrameType>(type), length};
}

std::vector<std::byte> encodeFrame(FrameType type, const Secret& secret, std::span<const std::byte> payload) {
  ByteWriter w;
  w.put(kMagic);
  w.put(kVersion);
  w.put(static_cast<uint16_t>(type));
  w.putBytes(secret.bytes);
  w.put(static_cast<uint32_t>(payload.size()));
  w.putBytes(payload);
  return std::move(w.bytes());
}

void sendFrame(net::Socket& socket, FrameType type, const Secret& secret, std::span<const std::byte> payload,
               Deadline deadline, const Cancellation* cancel) {
  socket.sendAll(encodeFrame(type, secret, payload), deadline, cancel);
}

std::vector<std::byte> recvFrame(net::Socket& socket, FrameType expected, const Secret& secret, uint32_t maxLength,
                                 Deadline deadline, const Cancellation* cancel) {
  std::array<std::byte, kFrameHeaderBytes> raw;
  socket.recvAll(raw, deadline, cancel);
  FrameHeader header = parseFrameHeader(raw, secret, maxLength);
  if (header.type != expected) {
    throw Error(loomRemoteError, "unexpected bootstrap frame type " + std::to_string(static_cast<int>(header.type)) +
                                     " from " + socket.label());
  }
  std::vector<std::byte> payload(header.length);
  socket.recvAll(payload, deadline, cancel);
  return payload;
}

}  // namespace loom
