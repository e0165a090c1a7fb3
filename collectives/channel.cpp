#include "collectives/channel.hpp"

namespace loom::coll {

CollectiveChannel::CollectiveChannel(Engine& engine)
    : engine_(engine),
      send_(static_cast<size_t>(engine.nranks())),
      recv_(static_cast<size_t>(engine.nranks())) {}

transport::SendConnection& CollectiveChannel::send(int peer) {
  auto& connection = send_[static_cast<size_t>(peer)];
  if (!connection) connection = engine_.connect(peer, transport::Channel::Collective);
  return *connection;
}

transport::RecvConnection* CollectiveChannel::recv(int peer) {
  auto& connection = recv_[static_cast<size_t>(peer)];
  if (!connection) connection = engine_.claim(peer, transport::Channel::Collective);
  return connection.get();
}

}  // namespace loom::coll
