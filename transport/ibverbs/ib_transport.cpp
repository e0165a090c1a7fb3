#include "transport/ibverbs/ib_transport.hpp"

#include <charconv>

#include "base/bytes.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/net/interfaces.hpp"
#include "base/random.hpp"
#include "transport/handshake.hpp"
#include "transport/ibverbs/ib_connection.hpp"
#include "transport/ibverbs/registration_cache.hpp"

namespace loom::transport::ibverbs {
namespace {

// The handshake's frames after the Reply: fixed size, so a peer that sends
// anything else is found at once.
constexpr uint32_t kReceiverMagic = 0x4c49'4252;  // "LIBR"
constexpr uint32_t kSenderMagic = 0x4c49'4253;    // "LIBS"
constexpr uint8_t kReady = 0x52;
constexpr size_t kAddressBytes = 2 + 16 + 4 + 4 + 1 + 1;

void put(ByteWriter& w, const QpAddress& a) {
  w.put(a.lid);
  w.putBytes(std::as_bytes(std::span(a.gid)));
  w.put(a.qpn);
  w.put(a.psn);
  w.put(a.mtu);
  w.put(static_cast<uint8_t>(a.global));
}

QpAddress getAddress(ByteReader& r) {
  QpAddress a;
  a.lid = r.get<uint16_t>();
  auto gid = r.take(a.gid.size());
  std::memcpy(a.gid.data(), gid.data(), gid.size());
  a.qpn = r.get<uint32_t>();
  a.psn = r.get<uint32_t>() & 0xffffff;
  a.mtu = r.get<uint8_t>();
  a.global = r.get<uint8_t>() != 0;
  if (a.mtu < 1 || a.mtu > 5) throw Error(loomRemoteError, "a queue pair address with MTU code " + std::to_string(a.mtu));
  return a;
}

// A handshake frame, checked to be the size the peer reads.
std::span<const std::byte> frame(ByteWriter& w, size_t bytes) {
  if (w.bytes().size() != bytes) throw Error(loomInternalError, "a verbs handshake frame is not " + std::to_string(bytes) + " bytes");
  return w.bytes();
}

constexpr size_t kReceiverFrame = 4 + kAddressBytes + 8 + 4;
constexpr size_t kSenderFrame = 4 + kAddressBytes;

uint32_t randomPsn() {
  uint32_t psn = 0;
  fillRandom(std::as_writable_bytes(std::span(&psn, 1)));
  return psn & 0xffffff;
}

// Queue depths: a write per slot and a receive per slot on each side (the
// sender's receives take credits), one spare.
int sendDepth(const FifoShape& shape) { return static_cast<int>(shape.slots) + 1; }
int recvDepth(const FifoShape& shape) { return static_cast<int>(shape.slots); }

}  // namespace

std::optional<PortChoice> choosePort(std::span<const DeviceInfo> devices, std::string_view spec) {
  // "mlx5_0:1,^mlx5_1" -> the names for the filter, and the port each names.
  std::string names;
  std::vector<std::pair<std::string, int>> ports;
  size_t begin = 0;
  while (begin <= spec.size()) {
    const size_t end = std::min(spec.find(',', begin), spec.size());
    std::string_view item = spec.substr(begin, end - begin);
    if (const size_t colon = item.find(':'); colon != std::string_view::npos) {
      int port = 0;
      const auto digits = item.substr(colon + 1);
      if (std::from_chars(digits.data(), digits.data() + digits.size(), port).ec != std::errc() || port < 1) {
        throw Error(loomInvalidArgument, "LOOM_IB_HCA='" + std::string(spec) + "': '" + std::string(item) +
                                             "' names no port (device:port, port from 1)");
      }
      item = item.substr(0, colon);
      std::string_view bare = item;
      while (!bare.empty() && (bare.front() == '^' || bare.front() == '=')) bare.remove_prefix(1);
      ports.emplace_back(std::string(bare), port);
    }
    names += (names.empty() ? "" : ",") + std::string(item);
    begin = end + 1;
  }
  const net::InterfaceFilter filter(names);
  for (const auto& d : devices) {
    if (!spec.empty() && !filter.matches(d.name)) continue;
    for (size_t i = 0; i < d.ports.size(); ++i) {
      const int port = static_cast<int>(i) + 1;
      bool named = false, allowed = true;
      for (const auto& [name, p] : ports) {
        if (d.name.starts_with(name)) {
          named = true;
          allowed = p == port;
          if (allowed) break;
        }
      }
      if (named && !allowed) continue;
      if (d.ports[i].active) return PortChoice{d.name, port};
    }
  }
  return std::nullopt;
}

struct IbTransport::Opened {
  std::shared_ptr<Device> device;
  std::shared_ptr<RegistrationCache> cache;
};

IbTransport::IbTransport() = default;
IbTransport::~IbTransport() = default;

const IbTransport::Probe& IbTransport::probe() const {
  std::lock_guard lock(mutex_);
  Verbs* verbs = currentVerbs();
  if (probe_ && probe_->verbs == verbs) return *probe_;
  Probe p{.verbs = verbs, .choice = std::nullopt, .why = {}};
  if (verbs == nullptr) {
    p.why = "this build has no libibverbs";
  } else if (const auto devices = verbs->devices(); devices.empty()) {
    p.why = "no RDMA device (" + std::string(verbs->name()) + " lists none)";
  } else {
    const std::string spec = env::get("LOOM_IB_HCA");
    p.choice = choosePort(devices, spec);
    if (!p.choice) {
      p.why = spec.empty() ? "no RDMA device has an active port" : "LOOM_IB_HCA='" + spec + "' allows no active port";
    }
  }
  probe_ = std::move(p);
  return *probe_;
}

int IbTransport::preference(const Endpoint& self, const Endpoint& peer) const {
  if (!probe().choice) return 0;
  // Across hosts above UCX (3) and sockets (1); on one host it reaches the
  // peer, but shared memory serves it better and wins the registry's tie.
  return self.hostId != peer.hostId ? 4 : 1;
}

std::string IbTransport::cannotReach(const Endpoint&, const Endpoint&) const {
  const Probe& p = probe();
  return p.choice ? "it can" : p.why;
}

IbTransport::Opened& IbTransport::opened() {
  const Probe& p = probe();
  std::lock_guard lock(mutex_);
  if (opened_) return *opened_;
  if (!p.choice) throw Error(loomSystemError, "the verbs transport has no device: " + p.why);
  const int gidIndex = static_cast<int>(env::getInt("LOOM_IB_GID_INDEX", 0, 255));
  auto device = std::shared_ptr<Device>(p.verbs->open(p.choice->device, p.choice->port, gidIndex));
  auto cache = std::make_shared<RegistrationCache>(*device);
  LOOM_INFO(Net, "verbs transport on %s:%d (%s)", p.choice->device.c_str(), p.choice->port, p.verbs->name());
  opened_ = std::make_unique<Opened>(Opened{std::move(device), std::move(cache)});
  return *opened_;
}

std::shared_ptr<RegistrationCache> IbTransport::registrationCache() {
  std::lock_guard lock(mutex_);
  return opened_ ? opened_->cache : nullptr;
}

std::unique_ptr<SendConnection> IbTransport::connect(const Endpoint& peer, Channel channel, const Context& context) {
  const auto deadline = Deadline::after(context.timeout);
  Opened& o = opened();
  auto staging = std::make_unique<RegisteredFifo>(*o.device, context.fifo, /*remoteWrite=*/false);
  auto end = std::make_unique<QueuePairEnd>(o.device, sendDepth(context.fifo), recvDepth(context.fifo));
  end->postReceives(IbSendConnection::creditReceives(context.fifo));

  auto control = connectWithHello(peer, helloFor(context, peer, channel, kWireId), context, deadline);
  const Reply reply = recvReply(control, deadline, context.cancel);
  if (!reply.ok) throw Error(loomRemoteError, peerName(peer) + " refused a verbs connection: " + reply.detail);
  std::array<std::byte, kReceiverFrame> in{};
  control.recvAll(in, deadline, context.cancel);
  ByteReader r(in, "verbs handshake");
  if (r.get<uint32_t>() != kReceiverMagic) throw Error(loomRemoteError, peerName(peer) + " sent a bad verbs handshake");
  const QpAddress remote = getAddress(r);
  RemoteFifo fifo{.address = r.get<uint64_t>(), .rkey = r.get<uint32_t>()};

  const uint32_t psn = randomPsn();
  end->qp->connect(remote, psn);
  ByteWriter w;
  w.put(kSenderMagic);
  put(w, o.device->address(end->qp->qpn(), psn));
  control.sendAll(frame(w, kSenderFrame), deadline, context.cancel);
  std::byte ready{};
  control.recvAll(std::span(&ready, 1), deadline, context.cancel);
  if (ready != std::byte{kReady}) throw Error(loomRemoteError, peerName(peer) + " did not finish the verbs handshake");
  LOOM_INFO(Net, "verbs connection to %s [%s]", peerName(peer).c_str(), end->where().c_str());
  control.setLabel(peerName(peer));
  return std::make_unique<IbSendConnection>(o.device, std::move(staging), std::move(end), fifo, o.cache,
                                            Link{std::move(control), context.timeout, context.cancel}, context.fifo);
}

std::unique_ptr<RecvConnection> IbTransport::accept(net::Socket& control, const Hello& hello, const Context& context) {
  if (hello.fifo.slots < 1 || hello.fifo.slots > 1024 || hello.fifo.slotBytes == 0 ||
      hello.fifo.totalBytes() > FifoShape::kMaxTotalBytes) {
    throw Error(loomRemoteError, control.label() + " asked for an unsupported verbs FIFO shape");
  }
  const auto deadline = Deadline::after(context.timeout);
  Opened& o = opened();
  auto fifo = std::make_unique<RegisteredFifo>(*o.device, hello.fifo, /*remoteWrite=*/true);
  auto end = std::make_unique<QueuePairEnd>(o.device, sendDepth(hello.fifo), recvDepth(hello.fifo));
  const uint32_t psn = randomPsn();

  sendReply(control, {.ok = true, .detail = {}}, deadline, context.cancel);
  ByteWriter w;
  w.put(kReceiverMagic);
  put(w, o.device->address(end->qp->qpn(), psn));
  w.put(reinterpret_cast<uint64_t>(fifo->bytes.data()));
  w.put(fifo->region->rkey());
  control.sendAll(frame(w, kReceiverFrame), deadline, context.cancel);

  std::array<std::byte, kSenderFrame> in{};
  control.recvAll(in, deadline, context.cancel);
  ByteReader r(in, "verbs handshake");
  if (r.get<uint32_t>() != kSenderMagic) throw Error(loomRemoteError, control.label() + " sent a bad verbs handshake");
  end->qp->connect(getAddress(r), psn);
  end->postReceives(hello.fifo.slots);
  const std::byte ready{kReady};
  control.sendAll(std::span(&ready, 1), deadline, context.cancel);

  std::string name = "rank " + std::to_string(hello.from);
  control.setLabel(name);
  return std::make_unique<IbRecvConnection>(o.device, std::move(fifo), std::move(end),
                                            Link{std::move(control), context.timeout, context.cancel}, hello.fifo);
}

}  // namespace loom::transport::ibverbs
