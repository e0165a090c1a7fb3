// The framing of bootstrap messages: a fixed header (magic, version, type,
// the job's secret, payload length) followed by the payload. The header is
// checked before a single payload byte is read: a wrong magic, version or
// secret, or a length above the caller's limit, rejects the connection.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/cancellation.hpp"
#include "base/deadline.hpp"
#include "base/net/socket.hpp"
#include "base/secret.hpp"

namespace loom {

enum class FrameType : uint16_t {
  Hello = 1,       // rank -> root: rank, nranks, peer info
  RootReply = 2,   // root -> rank: status, message, every peer's info
  RingHello = 3,   // rank -> next rank on the bootstrap ring
  StoreRequest = 4,
  StoreReply = 5,
  Heartbeat = 6,      // rank -> next rank, every LOOM_HEARTBEAT_MS: rank
  Goodbye = 7,        // rank -> next rank when its communicator is destroyed: rank
  FailureNotice = 8,  // rank -> every rank: reporter, failed rank, why
  ShrinkOffer = 9,    // the survivors' new rank 0 -> each survivor: epoch, unique id
  ProgressQuery = 10,   // a rank surveying its peers -> each: rank
  ProgressReport = 11,  // the answer, on the same connection: rank, where its collectives are
  MismatchNotice = 12,  // rank -> every rank: reporter, what it found out of step
  LossNotice = 13,      // rank -> every rank: reporter, the peer or link a call of it lost
};
inline constexpr FrameType kLastFrameType = FrameType::LossNotice;

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

struct Frame {
  FrameType type;
  std::vector<std::byte> payload;
};

// Assembles frames from a non-blocking socket as its bytes arrive, so that
// one thread can watch many connections and a slow or silent one stalls none
// of the others. The header is checked as soon as it is complete.
class FrameReader {
 public:
  FrameReader(const Secret& secret, uint32_t maxLength) : secret_(secret), maxLength_(maxLength) {}

  // Reads what the socket holds: a frame once one is whole, else nothing.
  // Throws loomRemoteError on a defect, or when the peer closed or reset.
  std::optional<Frame> read(net::Socket& socket);
  // Takes a frame from `bytes`, as read() does from a socket; used by read()
  // and by the fuzz target.
  std::optional<Frame> feed(std::span<const std::byte>& bytes);
  // Part of a frame has arrived, not all of it.
  bool midFrame() const { return headerHave_ > 0 || parsed_.has_value(); }

 private:
  std::span<std::byte> want();
  std::optional<Frame> got(size_t n);

  Secret secret_;
  uint32_t maxLength_;
  std::array<std::byte, kFrameHeaderBytes> header_{};
  size_t headerHave_ = 0;
  std::optional<FrameHeader> parsed_;
  std::vector<std::byte> payload_;
  size_t payloadHave_ = 0;
};

}  // namespace loom
