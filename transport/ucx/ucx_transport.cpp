#include "transport/ucx/ucx_transport.hpp"

#include "base/error.hpp"
#include "base/log.hpp"
#include "transport/handshake.hpp"
#include "transport/ucx/drainer.hpp"
#include "transport/ucx/ucx_connection.hpp"

namespace loom::transport::ucx {
namespace {

// A worker's address: u32 length, then the bytes (UCX's own format).
constexpr uint32_t kMaxAddressBytes = 64 * 1024;

void sendAddress(net::Socket& socket, const std::vector<std::byte>& address, Deadline deadline,
                 const Cancellation* cancel) {
  const auto length = static_cast<uint32_t>(address.size());
  socket.sendAll(std::as_bytes(std::span(&length, 1)), deadline, cancel);
  socket.sendAll(address, deadline, cancel);
}

std::vector<std::byte> recvAddress(net::Socket& socket, Deadline deadline, const Cancellation* cancel) {
  uint32_t length = 0;
  socket.recvAll(std::as_writable_bytes(std::span(&length, 1)), deadline, cancel);
  if (length == 0 || length > kMaxAddressBytes) {
    throw Error(loomRemoteError, socket.label() + " sent a UCX worker address of " + std::to_string(length) + " bytes");
  }
  std::vector<std::byte> address(length);
  socket.recvAll(address, deadline, cancel);
  return address;
}

}  // namespace

UcxTransport::UcxTransport() = default;
UcxTransport::~UcxTransport() = default;

int UcxTransport::preference(const Endpoint& self, const Endpoint& peer) const {
  static const bool rdma = rdmaDevicePresent();
  if (self.hostId != peer.hostId && rdma) return 3;
  // It reaches every peer; on a tie the registry keeps the earlier transport.
  return 1;
}

std::shared_ptr<UcpContext> UcxTransport::ucp(const FifoShape& fifo) {
  std::lock_guard lock(mutex_);
  if (!ucp_) ucp_ = std::make_shared<UcpContext>(fifo.slotBytes + sizeof(SlotTag));
  return ucp_;
}

std::shared_ptr<Drainer> UcxTransport::drainer() {
  std::lock_guard lock(mutex_);
  if (!drainer_) drainer_ = std::make_shared<Drainer>();
  return drainer_;
}

std::unique_ptr<SendConnection> UcxTransport::connect(const Endpoint& peer, Channel channel, const Context& context) {
  const auto deadline = Deadline::after(context.timeout);
  const PeerErrors errors = peer.hostId == context.self.hostId ? PeerErrors::ByControlSocket : PeerErrors::Reported;
  auto worker = std::make_unique<Worker>(ucp(context.fifo));
  auto control = connectWithHello(peer, helloFor(context, peer, channel, kWireId), context, deadline);
  const Reply reply = recvReply(control, deadline, context.cancel);
  if (!reply.ok) throw Error(loomRemoteError, peerName(peer) + " refused a UCX connection: " + reply.detail);
  worker->connect(recvAddress(control, deadline, context.cancel), errors, peerName(peer));
  LOOM_INFO(Net, "UCX connection to %s", peerName(peer).c_str());
  return std::make_unique<UcxSendConnection>(std::move(worker), std::move(control), context.fifo, context.cancel,
                                             drainer());
}

std::unique_ptr<RecvConnection> UcxTransport::accept(net::Socket& control, const Hello& hello, const Context& context) {
  if (hello.fifo.slots < 1 || hello.fifo.slots > 1024 || hello.fifo.slotBytes == 0 ||
      hello.fifo.totalBytes() > FifoShape::kMaxTotalBytes) {
    throw Error(loomRemoteError, control.label() + " asked for an unsupported UCX FIFO shape");
  }
  const auto deadline = Deadline::after(context.timeout);
  auto worker = std::make_unique<Worker>(ucp(hello.fifo));
  sendReply(control, {.ok = true, .detail = {}}, deadline, context.cancel);
  sendAddress(control, worker->address(), deadline, context.cancel);
  return std::make_unique<UcxRecvConnection>(std::move(worker), std::move(control), hello.fifo);
}

}  // namespace loom::transport::ucx
