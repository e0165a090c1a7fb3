#include "transport/socket/socket_transport.hpp"

#include <sys/socket.h>

#include <cstring>

#include "base/bytes.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/random.hpp"
#include "transport/handshake.hpp"
#include "transport/socket/socket_connection.hpp"

namespace loom::transport::sock {
namespace {

constexpr uint32_t kMaxSockets = 16;

}  // namespace

std::array<std::byte, Hello::kTransportBytes> SocketHello::encode() const {
  ByteWriter w;
  w.put(index);
  w.put(count);
  w.put(nonce);
  std::array<std::byte, Hello::kTransportBytes> out{};
  std::memcpy(out.data(), w.bytes().data(), out.size());
  return out;
}

SocketHello SocketHello::decode(const Hello& hello) {
  ByteReader r(hello.transportBytes, "socket hello");
  SocketHello h;
  h.index = r.get<uint16_t>();
  h.count = r.get<uint16_t>();
  h.nonce = r.get<uint64_t>();
  return h;
}

std::unique_ptr<SendConnection> SocketTransport::connect(const Endpoint& peer, Channel channel, const Context& context) {
  uint64_t nonce = 0;
  fillRandom(std::as_writable_bytes(std::span(&nonce, 1)));
  const auto count = static_cast<uint32_t>(context.socketsPerPeer);
  auto deadline = Deadline::after(context.timeout);
  std::vector<net::Socket> sockets;
  for (uint32_t i = 0; i < count; ++i) {
    Hello hello = helloFor(context, peer, channel, kWireId);
    hello.transportBytes =
        SocketHello{.index = static_cast<uint16_t>(i), .count = static_cast<uint16_t>(count), .nonce = nonce}.encode();
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
  const SocketHello own = SocketHello::decode(hello);
  if (own.count == 0 || own.count > kMaxSockets || own.index >= own.count ||
      hello.fifo.slots < own.count || hello.fifo.slots > 1024 || hello.fifo.slotBytes == 0 ||
      hello.fifo.totalBytes() > FifoShape::kMaxTotalBytes) {
    throw Error(loomRemoteError, "rank " + std::to_string(hello.from) + " asked for an unsupported socket connection");
  }
  auto& parts = partial_[{hello.from, own.nonce}];
  if (parts.empty()) parts.resize(own.count);
  if (parts.size() != own.count || parts[own.index].valid()) {
    partial_.erase({hello.from, own.nonce});
    throw Error(loomRemoteError, "rank " + std::to_string(hello.from) + " sent inconsistent socket hellos");
  }
  sendReply(socket, {.ok = true, .detail = {}}, Deadline::after(context.timeout), context.cancel);
  configureDataSocket(socket);
  parts[own.index] = std::move(socket);
  for (const auto& s : parts) {
    if (!s.valid()) return nullptr;
  }
  auto sockets = std::move(parts);
  partial_.erase({hello.from, own.nonce});
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
