// InfiniBand and RoCE through verbs (ib_connection.hpp has the protocol).
//
// Each communicator opens one port of one device, with one protection domain
// and one registration cache that all its connections share. The port is
// LOOM_IB_HCA's (NCCL_IB_HCA's grammar: "mlx5_0:1,mlx5_1", "=" for exact
// names, "^" to exclude), else the first active port of any device; on RoCE
// it addresses by the gid at LOOM_IB_GID_INDEX.
//
// The handshake: the receiver answers the Hello with its queue pair's
// address and its FIFO's address and rkey; the sender connects its queue
// pair and answers with its own address; the receiver connects its queue
// pair, posts a receive for every slot and says it is ready. The socket then
// stays open as the control channel.
//
// The registry prefers it to UCX and sockets for peers on other hosts when a
// device has an active port, and LOOM_TRANSPORT=ibverbs forces it (also on
// one host, as NCCL_P2P_DISABLE with NCCL_SHM_DISABLE would).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "transport/ibverbs/verbs.hpp"
#include "transport/transport.hpp"

namespace loom::transport::ibverbs {

class RegistrationCache;

// A device's port, as LOOM_IB_HCA chose it.
struct PortChoice {
  std::string device;
  int port = 1;
};

// The first active port that `spec` (LOOM_IB_HCA's grammar) allows, in the
// order the devices are listed; nothing if none is. A spec that names a
// port names that port only.
std::optional<PortChoice> choosePort(std::span<const DeviceInfo> devices, std::string_view spec);

class IbTransport final : public Transport {
 public:
  static constexpr uint32_t kWireId = 5;

  IbTransport();
  ~IbTransport() override;

  const char* name() const override { return "ibverbs"; }
  uint32_t wireId() const override { return kWireId; }
  int preference(const Endpoint& self, const Endpoint& peer) const override;
  std::string cannotReach(const Endpoint& self, const Endpoint& peer) const override;
  std::unique_ptr<SendConnection> connect(const Endpoint& peer, Channel channel, const Context& context) override;
  std::unique_ptr<RecvConnection> accept(net::Socket& control, const Hello& hello, const Context& context) override;

  // The communicator's registration cache, once a connection opened the
  // device (tests look at its counts).
  std::shared_ptr<RegistrationCache> registrationCache();

 private:
  struct Opened;
  struct Probe {
    Verbs* verbs = nullptr;
    std::optional<PortChoice> choice;
    std::string why;  // without a choice: why there is none
  };
  // The port this communicator uses, or why there is none: looked up once
  // (listing devices opens each one), again only if the verbs in use change.
  const Probe& probe() const;
  // The device and cache, opened on first use.
  Opened& opened();

  mutable std::mutex mutex_;
  mutable std::optional<Probe> probe_;
  std::unique_ptr<Opened> opened_;
};

}  // namespace loom::transport::ibverbs
