// The out-of-band network of a communicator: after the rendezvous each rank
// holds a TCP connection to the next rank and one from the previous, over
// which allgather and barrier run as rings. It carries set-up traffic only
// (addresses, colors, ids), never user data. Its listener then serves the
// watchdog (watchdog.hpp): heartbeats, failure notices, shrink offers.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <vector>

#include "base/cancellation.hpp"
#include "base/net/socket.hpp"
#include "comm/bootstrap/peer_info.hpp"
#include "comm/bootstrap/unique_id.hpp"
#include "comm/bootstrap/watchdog.hpp"
#include "transport/transport.hpp"

namespace loom {

class Bootstrap final : public transport::OutOfBand {
 public:
  // `listener` is this rank's bootstrap listener; self.bootstrapAddress names it.
  Bootstrap(const UniqueIdData& id, int rank, int nranks, PeerInfo self, net::Socket listener,
            std::chrono::milliseconds timeout, const Cancellation* cancel);

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  const std::vector<PeerInfo>& peers() const { return peers_; }

  // `buffer` holds size() blocks of `blockBytes`; this rank's block is filled
  // in, the others are filled by the call.
  void allgather(std::span<std::byte> buffer, size_t blockBytes) override;
  void barrier();

  // Starts watching the peers (more than one rank only); the watchdog takes the listener.
  void watch(Watchdog::Settings settings, Watchdog::Handlers handlers);
  // Null until watch(), and with a single rank.
  Watchdog* watchdog() { return watchdog_.get(); }

 private:
  void connectRing(const Secret& secret, Deadline deadline);

  int rank_;
  int nranks_;
  std::chrono::milliseconds timeout_;
  const Cancellation* cancel_;
  std::vector<PeerInfo> peers_;
  net::Socket listener_;
  net::Socket next_;  // to rank + 1
  net::Socket prev_;  // from rank - 1
  Secret secret_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace loom
