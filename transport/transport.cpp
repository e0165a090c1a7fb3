#include "transport/transport.hpp"

#include <cstring>

#include "base/bytes.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "transport/handshake.hpp"
#include "transport/shm/shm_transport.hpp"
#include "transport/socket/socket_transport.hpp"

namespace loom::transport {
namespace {

constexpr size_t kEndpointBlock = 128;

}  // namespace

const char* transportName(TransportKind kind) {
  switch (kind) {
    case TransportKind::Shm: return "shm";
    case TransportKind::Socket: return "socket";
  }
  return "unknown";
}

FifoShape FifoShape::fromEnv() {
  FifoShape shape;
  auto total = static_cast<uint64_t>(env::getInt("LOOM_BUFFSIZE", 64 * 1024, static_cast<long long>(kMaxTotalBytes)));
  shape.slotBytes = static_cast<uint32_t>(total / shape.slots / 64 * 64);
  return shape;
}

std::vector<std::unique_ptr<Transport>> allTransports() {
  std::vector<std::unique_ptr<Transport>> all;
  all.push_back(std::make_unique<shm::ShmTransport>());
  all.push_back(std::make_unique<sock::SocketTransport>());
  return all;
}

Transport& selectTransport(std::span<const std::unique_ptr<Transport>> transports, const Endpoint& self,
                           const Endpoint& peer) {
  auto forced = env::getIfSet("LOOM_TRANSPORT");
  Transport* best = nullptr;
  for (const auto& t : transports) {
    if (forced) {
      if (*forced != transportName(t->kind())) continue;
      if (!t->canConnect(self, peer)) {
        throw Error(loomInvalidUsage, "LOOM_TRANSPORT=" + *forced + " cannot reach " + peerName(peer) +
                                          " (it is on another host)");
      }
      return *t;
    }
    if (t->canConnect(self, peer) && (best == nullptr || t->estimate().bandwidthGBps > best->estimate().bandwidthGBps)) {
      best = t.get();
    }
  }
  if (forced) throw Error(loomInvalidArgument, "LOOM_TRANSPORT='" + *forced + "' is not one of: shm, socket");
  if (best == nullptr) throw Error(loomInternalError, "no transport reaches " + peerName(peer));
  return *best;
}

std::vector<Endpoint> exchangeEndpoints(OutOfBand& oob, const Endpoint& self, int nranks) {
  std::vector<std::byte> blocks(kEndpointBlock * static_cast<size_t>(nranks));
  ByteWriter w;
  w.put(static_cast<int32_t>(self.rank));
  w.put(self.hostId);
  w.put(static_cast<int32_t>(self.pid));
  w.putString(self.listener.toString());
  if (w.bytes().size() > kEndpointBlock) throw Error(loomInternalError, "endpoint does not fit its block");
  std::memcpy(blocks.data() + kEndpointBlock * static_cast<size_t>(self.rank), w.bytes().data(), w.bytes().size());
  oob.allgather(blocks, kEndpointBlock);
  std::vector<Endpoint> all(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    ByteReader reader(std::span<const std::byte>(blocks).subspan(kEndpointBlock * static_cast<size_t>(r), kEndpointBlock), "endpoint");
    Endpoint& e = all[static_cast<size_t>(r)];
    e.rank = reader.get<int32_t>();
    e.hostId = reader.get<uint64_t>();
    e.pid = reader.get<int32_t>();
    e.listener = net::SocketAddress::parse(reader.getString(kEndpointBlock));
    if (e.rank != r) throw Error(loomRemoteError, "rank " + std::to_string(r) + " sent an endpoint for rank " + std::to_string(e.rank));
  }
  return all;
}

}  // namespace loom::transport
