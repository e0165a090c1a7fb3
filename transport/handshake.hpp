// The first bytes on every data connection. The sender presents a Hello
// carrying the communicator's secret; the receiver's listener drops the
// connection without a word if the secret, magic or version is wrong, and
// otherwise hands it to the transport named in it, which answers with a
// Reply (a status and transport-specific text, e.g. a segment name). The
// Hello's last bytes belong to that transport (the socket transport's: which
// socket of how many), so a new transport needs no new field here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/deadline.hpp"
#include "base/net/socket.hpp"
#include "base/secret.hpp"
#include "transport/transport.hpp"

namespace loom::transport {

struct Hello {
  Secret secret;
  int32_t from = -1;  // the sender's rank
  int32_t to = -1;    // the receiver's rank
  Channel channel = Channel::PointToPoint;
  uint32_t transport = 0;  // the transport's wireId()
  FifoShape fifo;
  static constexpr size_t kTransportBytes = 12;
  std::array<std::byte, kTransportBytes> transportBytes{};  // the named transport's own

  static constexpr size_t kBytes = 64;
  std::array<std::byte, kBytes> encode() const;
  // Throws loomRemoteError on a wrong magic or version (the secret is the caller's to check).
  static Hello decode(std::span<const std::byte> bytes);
};

struct Reply {
  bool ok = false;
  std::string detail;  // transport-specific on success, the reason on refusal

  static constexpr size_t kMaxDetail = 256;
};

// A Reply as u32 status | u32 length | detail.
void sendReply(net::Socket& socket, const Reply& reply, Deadline deadline, const Cancellation* cancel);
// Waits for the Reply; a closed connection means the peer refused the Hello.
Reply recvReply(net::Socket& socket, Deadline deadline, const Cancellation* cancel);

// The Hello of a connection from context.self to `peer` over the transport
// `wireId`; its own bytes are the transport's to fill.
Hello helloFor(const Context& context, const Endpoint& peer, Channel channel, uint32_t wireId);

// Connects to peer's listener and presents `hello`.
net::Socket connectWithHello(const Endpoint& peer, const Hello& hello, const Context& context, Deadline deadline);

// "rank 3 (10.0.0.2:4455)": how errors name a peer.
std::string peerName(const Endpoint& peer);

}  // namespace loom::transport
