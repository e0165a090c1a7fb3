// The framing of bootstrap messages: a fixed header (magic, version, type,
// the job's secret, payload length) followed by the payload. The header is
// checked before a single payload byte is read: a wrong magic, version or
// secret, or a length above the caller's limit, rejects the connection.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/base/cancellation.hpp"
#include "comm/base/deadline.hpp"
#include "comm/base/secret.hpp"
#include "transport/socket/socket.hpp"

namespace loom {

enum class FrameType : uint16_t {
  Hello = 1,       // rank -> root: rank, nranks, peer info
  RootReply = 2,   // root -> rank: status, message, every peer's info
  RingHello = 3,   // rank -> next rank on the bootstrap ring
  StoreRequest = 4,
  StoreReply = 5,
};

struct FrameHeader {
  FrameType type;
  uint32_t length;
};

inline constexpr size_t kFrameHeaderBytes = 4 + 2 + 2 + 16 + 4;

// Parses and validates a header; loomRemoteError with the reason on any defect.
FrameHeader parseFrameHeader(std::span<const std::byte, kFrameHeaderBytes> raw, const Secret& secret,
                             uint32_t maxLength);
std::vector<std::byte> encodeFrame(FrameType type, const Secret& secret, std::span<const std::byte> payload);

void sendFrame(net::Socket& socket, FrameType type, const Secret& secret, std::span<const std::byte> payload,
               Deadline deadline, const Cancellation* cancel);
// Receives one frame of `expected` type; anything else is loomRemoteError.
std::vector<std::byte> recvFrame(net::Socket& socket, FrameType expected, const Secret& secret, uint32_t maxLength,
                                 Deadline deadline, const Cancellation* cancel);

}  // namespace loom
