#include "comm/bootstrap/rendezvous.hpp"

#include "base/error.hpp"
#include "base/log.hpp"
#include "comm/bootstrap/frame.hpp"

namespace loom {

std::vector<std::byte> Hello::encode() const {
  ByteWriter w;
  w.put(static_cast<int32_t>(rank));
  w.put(static_cast<int32_t>(nranks));
  info.serialize(w);
  return std::move(w.bytes());
}

Hello Hello::decode(std::span<const std::byte> payload) {
  ByteReader r(payload, "Hello");
  Hello h;
  h.rank = r.get<int32_t>();
  h.nranks = r.get<int32_t>();
  h.info = PeerInfo::deserialize(r);
  r.expectEnd();
  if (h.nranks < 1 || h.nranks > kMaxRanks) {
    throw Error(loomRemoteError, "malformed Hello: nranks " + std::to_string(h.nranks) + " out of range");
  }
  return h;
}

std::vector<std::byte> RootReply::encode() const {
  ByteWriter w;
  w.put(static_cast<int32_t>(status));
  w.putString(message);
  w.put(static_cast<uint32_t>(peers.size()));
  for (const auto& p : peers) p.serialize(w);
  return std::move(w.bytes());
}

RootReply RootReply::decode(std::span<const std::byte> payload) {
  ByteReader r(payload, "RootReply");
  RootReply reply;
  auto status = r.get<int32_t>();
  if (status < loomSuccess || status >= loomNumResults) throw Error(loomRemoteError, "malformed RootReply status");
  reply.status = static_cast<loomResult_t>(status);
  reply.message = r.getString(64 * 1024);
  auto count = r.get<uint32_t>();
  if (count > static_cast<uint32_t>(kMaxRanks)) throw Error(loomRemoteError, "malformed RootReply: too many peers");
  for (uint32_t i = 0; i < count; ++i) reply.peers.push_back(PeerInfo::deserialize(r));
  r.expectEnd();
  return reply;
}

std::vector<PeerInfo> rendezvous(const UniqueIdData& id, int rank, int nranks, const PeerInfo& self,
                                 std::chrono::milliseconds timeout, const Cancellation* cancel) {
  auto deadline = Deadline::after(timeout);
  auto root = net::Socket::connect(id.root, deadline, cancel, "the rendezvous root");
  sendFrame(root, FrameType::Hello, id.secret, Hello{rank, nranks, self}.encode(), deadline, cancel);
  // The root's clock started first; give its verdict (which names the missing
  // ranks) a moment to arrive after ours runs out.
  auto verdictDeadline = Deadline::after(timeout + kVerdictGrace);
  RootReply reply;
  try {
    reply = RootReply::decode(
        recvFrame(root, FrameType::RootReply, id.secret, kMaxRootReplyBytes, verdictDeadline, cancel));
  } catch (const Error& e) {
    if (e.code() == loomTimeout) {
      throw Error(loomTimeout, "rank " + std::to_string(rank) + " timed out after " + std::to_string(timeout.count()) +
                                   " ms waiting for the other ranks at the rendezvous root " + id.root.toString());
    }
    throw;
  }
  if (reply.status != loomSuccess) throw Error(reply.status, reply.message);
  if (reply.peers.size() != static_cast<size_t>(nranks)) {
    throw Error(loomRemoteError, "rendezvous root answered with " + std::to_string(reply.peers.size()) + " peers, not " +
                                     std::to_string(nranks));
  }
  LOOM_INFO(Bootstrap, "rendezvous done: %d ranks", nranks);
  return std::move(reply.peers);
}

}  // namespace loom
