// The communicator: a rank's view of its group (rank, size, which ranks share
// its node), its bootstrap network, and its state for the C API (async
// error, last error message, the cancellation that loomCommAbort fires), and
// its progress engine.
#pragma once

#include <loom/loom.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/base/cancellation.hpp"
#include "comm/bootstrap/bootstrap.hpp"
#include "comm/config.hpp"
#include "comm/engine/engine.hpp"
#include "topology/placement.hpp"

namespace loom {

// What a layer above keeps per communicator (the collectives' connections,
// shared segments and reduction ops): created by that layer on first use,
// destroyed with the communicator, before its engine.
class CommExtension {
 public:
  virtual ~CommExtension() = default;
};

class Communicator {
 public:
  explicit Communicator(Config config);
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Rendezvous and bootstrap. Blocking: returns when done or throws.
  void init(const UniqueIdData& id, int rank, int nranks);
  // The same on a thread of the communicator; asyncError() is loomInProgress until it ends.
  void initAsync(const UniqueIdData& id, int rank, int nranks);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }
  const std::vector<PeerInfo>& peers() const;
  // Every rank's place and the ring, trees and NICs planned from them.
  const topo::Placement& placement() const;
  Bootstrap& bootstrap();
  // The data path: connections to peers and the ops posted on them.
  Engine& engine();
  const Config& config() const { return config_; }

  // Throws unless init finished successfully (loomInProgress while it runs,
  // the init error after a failure).
  void requireReady() const;
  loomResult_t asyncError() const { return asyncError_.load(std::memory_order_acquire); }

  // Unblocks every wait at once; the object stays valid until deleted.
  void abort() noexcept { cancel_.cancel(); }

  void setLastError(const std::string& message);
  std::string lastError() const;

  // API calls in flight on this communicator; loomCommAbort waits for zero.
  std::atomic<int> activeCalls{0};
  // Host-stream tasks that use this communicator, queued or running;
  // finalize, destroy and abort wait for zero.
  std::atomic<int> streamTasks{0};

  // The collectives layer's state; `extensionMutex` guards its creation.
  std::mutex extensionMutex;
  std::unique_ptr<CommExtension> collectives;

 private:
  void runInit(const UniqueIdData& id, int rank, int nranks);
  // Opens the data listener (on the interface of this rank's NIC when it has
  // one here), exchanges endpoints, creates the engine.
  void startEngine(const UniqueIdData& id, const PeerInfo& self);

  Config config_;
  Cancellation cancel_;
  int rank_ = -1;
  int size_ = 0;
  int localRank_ = -1;
  int localSize_ = 0;
  std::unique_ptr<Bootstrap> bootstrap_;
  topo::Placement placement_;
  std::unique_ptr<Engine> engine_;  // after bootstrap_: destroyed first
  std::atomic<loomResult_t> asyncError_{loomInProgress};
  mutable std::mutex errorMutex_;
  std::string lastError_;
  std::string initError_;
  std::thread initThread_;
};

// Creates a listener on the interface chosen by LOOM_SOCKET_IFNAME (port 0:
// any free port), the first of them named in `preferred` if any is.
net::Socket listenOnBootstrapInterface(const std::string& label, std::span<const std::string> preferred = {});

}  // namespace loom

// The C handle is the communicator itself.
struct loomComm final : loom::Communicator {
  using Communicator::Communicator;
};
