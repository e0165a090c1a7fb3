// A transport connects two ranks with a Connection (connection.hpp). This is
// the interface the communicator sees; shm/ and socket/ implement it today,
// UCX and verbs will tomorrow.
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

enum class TransportKind : uint32_t { Shm = 1, Socket = 2 };

// Independent connections between the same two ranks: point-to-point calls
// and collectives each have their own FIFO, so a collective's chunks never
// queue behind (or interleave with) a user's sends.
enum class Channel : uint32_t { PointToPoint = 0, Collective = 1 };
constexpr uint32_t kChannels = 2;

const char* transportName(TransportKind kind);

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

// Latency and bandwidth of a path, for selection and the tuner.
struct LinkEstimate {
  double latencyUs = 0;
  double bandwidthGBps = 0;
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

  virtual TransportKind kind() const = 0;
  virtual bool canConnect(const Endpoint& self, const Endpoint& peer) const = 0;
  virtual LinkEstimate estimate() const = 0;

  // Sender side: connects to peer's listener, runs the handshake, returns the send end.
  virtual std::unique_ptr<SendConnection> connect(const Endpoint& peer, Channel channel, const Context& context) = 0;
  // Receiver side: `socket` carried `hello` (secret already checked); the
  // transport takes it (moves from it) unless it throws. Returns
  // the receive end once complete; a transport that needs several sockets per
  // connection returns null until the last one arrives.
  virtual std::unique_ptr<RecvConnection> accept(net::Socket& socket, const Hello& hello, const Context& context) = 0;
};

// Every transport this build has, best first.
std::vector<std::unique_ptr<Transport>> allTransports();

// The transport for the path self -> peer: LOOM_TRANSPORT if set (an error
// naming the peer if it cannot connect them), else the one with the highest
// bandwidth that can.
Transport& selectTransport(std::span<const std::unique_ptr<Transport>> transports, const Endpoint& self,
                           const Endpoint& peer);

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
