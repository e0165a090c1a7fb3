// UCX between any two ranks (UCP's tagged messages; ucx_connection.hpp has
// the protocol). The receiving end answers the Hello with its worker's
// address, to which the sending end opens its endpoint; the handshake's
// socket then stays open as the control channel (credits, a dead peer). UCX_* variables reach UCX untouched (UCX_TLS picks its
// transports, UCX_NET_DEVICES its devices).
//
// The registry prefers it to sockets across hosts when UCX has an RDMA
// device (InfiniBand, RoCE) to use; otherwise LOOM_TRANSPORT=ucx asks for it.
#pragma once

#include <memory>
#include <mutex>

#include "transport/transport.hpp"

namespace loom::transport::ucx {

class UcpContext;
class Drainer;

class UcxTransport final : public Transport {
 public:
  static constexpr uint32_t kWireId = 4;

  UcxTransport();
  ~UcxTransport() override;

  const char* name() const override { return "ucx"; }
  uint32_t wireId() const override { return kWireId; }
  int preference(const Endpoint& self, const Endpoint& peer) const override;
  std::unique_ptr<SendConnection> connect(const Endpoint& peer, Channel channel, const Context& context) override;
  std::unique_ptr<RecvConnection> accept(net::Socket& control, const Hello& hello, const Context& context) override;

 private:
  // The communicator's UCP context, made on first use (a job that never
  // uses UCX never initializes it), for slots of `fifo`'s size.
  std::shared_ptr<UcpContext> ucp(const FifoShape& fifo);
  // Its drainer thread, started with the first sending end.
  std::shared_ptr<Drainer> drainer();

  std::mutex mutex_;
  std::shared_ptr<UcpContext> ucp_;
  std::shared_ptr<Drainer> drainer_;
};

}  // namespace loom::transport::ucx
