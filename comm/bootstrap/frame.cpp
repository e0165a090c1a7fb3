#include "comm/bootstrap/frame.hpp"

#include <algorithm>

#include "base/bytes.hpp"
#include "base/error.hpp"

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
  if (type < static_cast<uint16_t>(FrameType::Hello) || type > static_cast<uint16_t>(kLastFrameType)) {
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

// Both ways in fill the same two buffers: the header, then the payload it announces.
std::span<std::byte> FrameReader::want() {
  return parsed_ ? std::span(payload_).subspan(payloadHave_) : std::span(header_).subspan(headerHave_);
}

std::optional<Frame> FrameReader::got(size_t n) {
  if (!parsed_) {
    headerHave_ += n;
    if (headerHave_ < header_.size()) return std::nullopt;
    parsed_ = parseFrameHeader(header_, secret_, maxLength_);
    payload_.assign(parsed_->length, std::byte{0});
    payloadHave_ = 0;
  } else {
    payloadHave_ += n;
  }
  if (payloadHave_ < payload_.size()) return std::nullopt;
  Frame frame{parsed_->type, std::move(payload_)};
  parsed_.reset();
  headerHave_ = 0;
  payload_ = {};
  return frame;
}

std::optional<Frame> FrameReader::feed(std::span<const std::byte>& bytes) {
  do {
    std::span<std::byte> into = want();
    const size_t n = std::min(bytes.size(), into.size());
    std::copy_n(bytes.begin(), n, into.begin());
    bytes = bytes.subspan(n);
    if (auto frame = got(n)) return frame;
  } while (!bytes.empty());
  return std::nullopt;
}

std::optional<Frame> FrameReader::read(net::Socket& socket) {
  // Reads no further than the frame: what follows stays in the kernel.
  // want() is never empty here: got() hands out a frame the moment it is whole.
  for (;;) {
    const size_t n = socket.recvSome(want());
    if (n == 0) return std::nullopt;
    if (auto frame = got(n)) return frame;
  }
}

}  // namespace loom
