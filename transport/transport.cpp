#include "transport/transport.hpp"

#include <cstring>

#include "base/bytes.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "transport/handshake.hpp"

namespace loom::transport {
namespace {

constexpr size_t kEndpointBlock = 128;

}  // namespace

FifoShape FifoShape::fromEnv() {
  FifoShape shape;
  auto total = static_cast<uint64_t>(env::getInt("LOOM_BUFFSIZE", 64 * 1024, static_cast<long long>(kMaxTotalBytes)));
  shape.slotBytes = static_cast<uint32_t>(total / shape.slots / 64 * 64);
  return shape;
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
