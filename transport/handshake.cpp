#include "transport/handshake.hpp"

#include <cstring>

#include "base/bytes.hpp"
#include "base/error.hpp"

namespace loom::transport {
namespace {

constexpr uint64_t kMagic = 0x415441444d4f4f4cull;  // "LOOMDATA"
constexpr uint32_t kVersion = 3;  // 3: transport-owned bytes

}  // namespace

std::array<std::byte, Hello::kBytes> Hello::encode() const {
  ByteWriter w;
  w.put(kMagic);
  w.put(kVersion);
  w.put(transport);
  w.putBytes(secret.bytes);
  w.put(from);
  w.put(to);
  w.put(static_cast<uint32_t>(channel));
  w.put(fifo.slots);
  w.put(fifo.slotBytes);
  w.putBytes(transportBytes);
  std::array<std::byte, kBytes> out{};
  if (w.bytes().size() != kBytes) throw Error(loomInternalError, "Hello encoding is not 64 bytes");
  std::memcpy(out.data(), w.bytes().data(), kBytes);
  return out;
}

Hello Hello::decode(std::span<const std::byte> bytes) {
  ByteReader r(bytes, "connection hello");
  if (r.get<uint64_t>() != kMagic) throw Error(loomRemoteError, "connection hello has a wrong magic number");
  if (r.get<uint32_t>() != kVersion) throw Error(loomRemoteError, "connection hello has an unsupported version");
  Hello h;
  h.transport = r.get<uint32_t>();
  auto secret = r.take(h.secret.bytes.size());
  std::memcpy(h.secret.bytes.data(), secret.data(), secret.size());
  h.from = r.get<int32_t>();
  h.to = r.get<int32_t>();
  const auto channel = r.get<uint32_t>();
  if (channel >= kChannels) throw Error(loomRemoteError, "connection hello names an unknown channel");
  h.channel = static_cast<Channel>(channel);
  h.fifo.slots = r.get<uint32_t>();
  h.fifo.slotBytes = r.get<uint32_t>();
  auto own = r.take(kTransportBytes);
  std::memcpy(h.transportBytes.data(), own.data(), own.size());
  r.expectEnd();
  return h;
}

void sendReply(net::Socket& socket, const Reply& reply, Deadline deadline, const Cancellation* cancel) {
  ByteWriter w;
  w.put(static_cast<uint32_t>(reply.ok ? 1 : 0));
  w.putString(reply.detail.substr(0, Reply::kMaxDetail));
  socket.sendAll(w.bytes(), deadline, cancel);
}

Reply recvReply(net::Socket& socket, Deadline deadline, const Cancellation* cancel) {
  std::array<std::byte, 8> head{};
  try {
    socket.recvAll(head, deadline, cancel);
  } catch (const Error& e) {
    if (e.code() != loomRemoteError) throw;
    throw Error(loomRemoteError, socket.label() + " refused the connection (closed it before replying: a wrong "
                                                  "secret, or it is shutting down)");
  }
  ByteReader r(head, "connection reply");
  Reply reply;
  reply.ok = r.get<uint32_t>() == 1;
  uint32_t length = r.get<uint32_t>();
  if (length > Reply::kMaxDetail) throw Error(loomRemoteError, "connection reply from " + socket.label() + " is too long");
  reply.detail.resize(length);
  socket.recvAll(std::as_writable_bytes(std::span(reply.detail)), deadline, cancel);
  return reply;
}

Hello helloFor(const Context& context, const Endpoint& peer, Channel channel, uint32_t wireId) {
  return {.secret = context.secret,
          .from = context.self.rank,
          .to = peer.rank,
          .channel = channel,
          .transport = wireId,
          .fifo = context.fifo};
}

net::Socket connectWithHello(const Endpoint& peer, const Hello& hello, const Context& context, Deadline deadline) {
  // The peer's listener has been up since init: a refusal means the peer is gone.
  auto socket = net::Socket::connect(peer.listener, deadline, context.cancel, peerName(peer), net::Socket::Refused::Fail);
  auto bytes = hello.encode();
  socket.sendAll(bytes, deadline, context.cancel);
  return socket;
}

std::string peerName(const Endpoint& peer) {
  return "rank " + std::to_string(peer.rank) + " (" + peer.listener.toString() + ")";
}

}  // namespace loom::transport
