// A transport connects two ranks with a Connection (connection.hpp). This is
// the interface the communicator sees; shm/, socket/, ucx/ and ibverbs/
// implement it today, CUDA IPC will tomorrow, each a folder and a line in the
// registry (registry.cpp), without touching comm/ or the collectives.
//
// Connections are one-directional and made lazily: the sender connects to the
// receiver's listener (listener.hpp) the first time it sends to it, presenting
// the communicator's secret in a Hello (handshake.hpp). The transport named in
// the Hello builds the receive end on the receiver's side.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/cancellation.hpp"
#include "base/net/address.hpp"
#include "base/net/socket.hpp"
#include "base/secret.hpp"
#include "transport/connection.hpp"

namespace loom::transport {

// Independent connections between the same two ranks: point-to-point calls
// and collectives each have their own FIFO, so a collective's chunks never
// queue behind (or interleave with) a user's sends.
enum class Channel : uint32_t { PointToPoint = 0, Collective = 1 };
constexpr uint32_t kChannels = 2;

// What transports know about a rank: exchanged once, out of band, at init.
struct Endpoint {
  int rank = -1;
  uint64_t hostId = 0;  // equal: same node, shared memory reachable
  int pid = 0;
  net::SocketAddress listener;  // where this rank accepts connections
};

// The slots of one connection's FIFO.
struct FifoShape {
  uint32_t slots = 8;
  uint32_t slotBytes = 512 * 1024;

  // The most LOOM_BUFFSIZE allows; a Hello asking for more is refused.
  static constexpr size_t kMaxTotalBytes = size_t{1} << 30;
  // From LOOM_BUFFSIZE (bytes per connection, split into `slots` slots).
  static FifoShape fromEnv();
  size_t totalBytes() const { return size_t{slots} * slotBytes; }
};

// What a transport needs from the communicator above it.
struct Context {
  Endpoint self;
  Secret secret;
  std::chrono::milliseconds timeout{0};
  const Cancellation* cancel = nullptr;
  FifoShape fifo;
  int socketsPerPeer = 2;
  // Where the rank's transport threads run, near its memory (topo::cpusFor);
  // empty: wherever they start.
  std::vector<int> cpus;
};

struct Hello;

class Transport {
 public:
  virtual ~Transport() = default;

  // As LOOM_TRANSPORT and loomCommGetPeerInfo spell it: "shm", "socket", "ucx".
  virtual const char* name() const = 0;
  // Names the transport in a Hello (handshake.hpp); each is taken once,
  // for good (registry.cpp).
  virtual uint32_t wireId() const = 0;
  // How well this transport serves the path self -> peer: 0 if it cannot,
  // else higher is better (NCCL's p2p > shm > net order). The registry picks
  // the highest.
  virtual int preference(const Endpoint& self, const Endpoint& peer) const = 0;
  // Why preference() is 0 for this path, for the error that LOOM_TRANSPORT
  // forcing it gives.
  virtual std::string cannotReach(const Endpoint&, const Endpoint&) const { return "it is on another host"; }

  // Sender side: connects to peer's listener, runs the handshake, returns the send end.
  virtual std::unique_ptr<SendConnection> connect(const Endpoint& peer, Channel channel, const Context& context) = 0;
  // Receiver side: `control` carried `hello` (secret already checked). It is
  // the connection's out-of-band channel, as NCCL's bootstrap is: the
  // transport answers the Hello on it (its segment's name; a UCX worker
  // address or a queue pair number tomorrow) and keeps it to learn when the
  // peer dies; only the socket transport also moves its data on it. The
  // transport takes it (moves from it) unless it throws. Returns the receive
  // end once complete; a transport that needs several sockets per connection
  // returns null until the last one arrives.
  virtual std::unique_ptr<RecvConnection> accept(net::Socket& control, const Hello& hello, const Context& context) = 0;
};

// The out-of-band exchange a communicator provides: every rank contributes
// one block of blockBytes at its rank's position and receives all others.
class OutOfBand {
 public:
  virtual ~OutOfBand() = default;
  virtual void allgather(std::span<std::byte> buffer, size_t blockBytes) = 0;
};

// Every rank's Endpoint, indexed by rank.
std::vector<Endpoint> exchangeEndpoints(OutOfBand& oob, const Endpoint& self, int nranks);

}  // namespace loom::transport
