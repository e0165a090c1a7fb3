#include "transport/shm/shm_transport.hpp"

#include <mutex>
#include <new>

#include "base/error.hpp"
#include "base/log.hpp"
#include "transport/handshake.hpp"
#include "transport/shm/shm_connection.hpp"

namespace loom::transport::shm {

ShmTransport::ShmTransport() {
  static std::once_flag swept;
  std::call_once(swept, ::loom::shm::removeStaleSegments);
}

int ShmTransport::preference(const Endpoint& self, const Endpoint& peer) const {
  return self.hostId == peer.hostId ? 2 : 0;
}

std::unique_ptr<SendConnection> ShmTransport::connect(const Endpoint& peer, Channel channel, const Context& context) {
  auto deadline = Deadline::after(context.timeout);
  auto socket = connectWithHello(peer, helloFor(context, peer, channel, kWireId), context, deadline);
  Reply reply = recvReply(socket, deadline, context.cancel);
  if (!reply.ok) throw Error(loomRemoteError, peerName(peer) + " refused a shared memory connection: " + reply.detail);
  auto segment = ::loom::shm::Segment::open(reply.detail, FifoView::segmentBytes(context.fifo));
  segment.unlink();  // both sides have it mapped now
  segment.mapEveryPage();  // the receiver's creation allocated every page; the first messages fault on none
  LOOM_INFO(Net, "shm connection to %s via %s", peerName(peer).c_str(), reply.detail.c_str());
  return std::make_unique<ShmSendConnection>(std::move(segment), context.fifo, std::move(socket));
}

std::unique_ptr<RecvConnection> ShmTransport::accept(net::Socket& socket, const Hello& hello, const Context& context) {
  if (hello.fifo.slots < 2 || hello.fifo.slots > kMaxSlots || hello.fifo.slotBytes < 64 ||
      hello.fifo.slotBytes % 64 != 0 || hello.fifo.totalBytes() > FifoShape::kMaxTotalBytes) {
    throw Error(loomRemoteError, socket.label() + " asked for an unsupported FIFO shape");
  }
  auto segment = ::loom::shm::Segment::create(FifoView::segmentBytes(hello.fifo));
  new (segment.data()) FifoControl();
  sendReply(socket, {.ok = true, .detail = segment.name()}, Deadline::after(context.timeout), context.cancel);
  return std::make_unique<ShmRecvConnection>(std::move(segment), hello.fifo, std::move(socket));
}

}  // namespace loom::transport::shm
