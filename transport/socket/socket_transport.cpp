#include "transport/socket/socket_transport.hpp"

#include <sys/socket.h>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/random.hpp"
#include "transport/handshake.hpp"
#include "transport/socket/socket_connection.hpp"

namespace loom::transport::sock {
namespace {

constexpr uint32_t kMaxSockets = 16;

}  // namespace

LinkEstimate SocketTransport::estimate() const {
  // Stated for TCP over a 10-25 Gb/s NIC; bench/p2p measures the real figures.
  return {.latencyUs = 30.0, .bandwidthGBps = 1.5};
}

std::unique_ptr<SendConnection> SocketTransport::connect(const Endpoint& peer, Channel channel, const Context& context) {
  uint64_t nonce = 0;
  fillRandom(std::as_writable_bytes(std::span(&nonce, 1)));
  const auto count = static_cast<uint32_t>(context.socketsPerPeer);
  auto deadline = Deadline::after(context.timeout);
  std::vector<net::Socket> sockets;
  for (uint32_t i = 0; i < count; ++i) {
    Hello hello{.secret = context.secret,
                .from = context.self.rank,
                .to = peer.rank,
                .channel = channel,
                .transport = TransportKind::Socket,
                .socketIndex = static_cast<uint16_t>(i),
                .socketCount = static_cast<uint16_t>(count),
                .fifo = context.fifo,
                .nonce = nonce};
    sockets.push_back(connectWithHello(peer, hello, context, deadline));
    configureDataSocket(sockets.back());
  }
  for (auto& s : sockets) {
    Reply reply = recvReply(s, deadline, context.cancel);
    if (!reply.ok) throw Error(loomRemoteError, peerName(peer) + " refused a socket connection: " + reply.detail);
  }
  LOOM_INFO(Net, "socket connection to %s over %u sockets", peerName(peer).c_str(), count);
  return std::make_unique<SocketSendConnection>(std::move(sockets), context.fifo, peerName(peer));
}

std::unique_ptr<RecvConnection> SocketTransport::accept(net::Socket& socket, const Hello& hello,
                                                        const Context& context) {
  if (hello.socketCount == 0 || hello.socketCount > kMaxSockets || hello.socketIndex >= hello.socketCount ||
      hello.fifo.slots < hello.socketCount || hello.fifo.slots > 1024 || hello.fifo.slotBytes == 0 ||
      hello.fifo.totalBytes() > FifoShape::kMaxTotalBytes) {
    throw Error(loomRemoteError, "rank " + std::to_string(hello.from) + " asked for an unsupported socket connection");
  }
  auto& parts = partial_[{hello.from, hello.nonce}];
  if (parts.empty()) parts.resize(hello.socketCount);
  if (parts.size() != hello.socketCount || parts[hello.socketIndex].valid()) {
    partial_.erase({hello.from, hello.nonce});
    throw Error(loomRemoteError, "rank " + std::to_string(hello.from) + " sent inconsistent socket hellos");
  }
  sendReply(socket, {.ok = true, .detail = {}}, Deadline::after(context.timeout), context.cancel);
  configureDataSocket(socket);
  parts[hello.socketIndex] = std::move(socket);
  for (const auto& s : parts) {
    if (!s.valid()) return nullptr;
  }
  auto sockets = std::move(parts);
  partial_.erase({hello.from, hello.nonce});
  std::string name = "rank " + std::to_string(hello.from);
  for (auto& s : sockets) s.setLabel(name);
  return std::make_unique<SocketRecvConnection>(std::move(sockets), hello.fifo, name);
}

void configureDataSocket(net::Socket& socket) {
  // Large buffers keep a fast sender from stalling on a window that delayed
  // ACKs hold shut; 4 MiB each way (the kernel doubles it for bookkeeping).
  int bytes = 4 << 20;
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

}  // namespace loom::transport::sock
