#include "comm/bootstrap/root.hpp"

#include <poll.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/net/partial_read.hpp"
#include "comm/bootstrap/frame.hpp"
#include "comm/bootstrap/peer_info.hpp"
#include "comm/bootstrap/rendezvous.hpp"

namespace loom {
namespace {

constexpr size_t kMaxPendingConnections = 4096;

class RootServer {
 public:
  RootServer(net::Socket listener, const Secret& secret, std::chrono::milliseconds timeout)
      : listener_(std::move(listener)), secret_(secret), timeout_(timeout), deadline_(Deadline::after(timeout)),
        thread_([this] { run(); }) {}

  ~RootServer() {
    cancel_.cancel();
    thread_.join();
  }

  bool finished() const { return finished_.load(std::memory_order_acquire); }

 private:
  struct Connection {
    explicit Connection(net::Socket s) : socket(std::move(s)) {}
    net::Socket socket;
    net::PartialRead read{kFrameHeaderBytes};
    bool headerDone = false;
  };
  struct Arrival {
    net::Socket socket;
    PeerInfo info;
  };

  void run() {
    try {
      loop();
    } catch (const std::exception& e) {
      LOOM_WARN(Bootstrap, "rendezvous root failed: %s", e.what());
    }
    // Done: its sockets go now; the object (and its eventfd) when reaped.
    pending_.clear();
    arrivals_.clear();
    listener_.close();
    finished_.store(true, std::memory_order_release);
  }

  void loop() {
    while (!cancel_.cancelled()) {
      if (nranks_ > 0 && static_cast<int>(arrivals_.size()) == nranks_ && failure_.empty()) {
        answerAll(loomSuccess, "");
        return;
      }
      if (deadline_.expired()) {
        answerAll(loomTimeout, failure_.empty() ? timeoutMessage() : failure_);
        return;
      }
      std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}, {cancel_.fd(), POLLIN, 0}};
      for (auto& c : pending_) fds.push_back({c.socket.fd(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), deadline_.pollTimeoutMs()) < 0 && errno != EINTR) {
        throwSystemError("poll", errno);
      }
      // Reverse order: service() may erase a pending connection.
      for (size_t i = fds.size(); i-- > 2;) {
        if (fds[i].revents != 0) service(i - 2);
      }
      if (fds[0].revents != 0) acceptAll();
    }
  }

  void acceptAll() {
    for (;;) {
      net::Socket s;
      try {
        s = listener_.accept(Deadline::after(std::chrono::milliseconds(0)), nullptr);
      } catch (const Error&) {
        return;  // nothing more to accept now
      }
      if (pending_.size() >= kMaxPendingConnections) {
        LOOM_WARN(Bootstrap, "rendezvous root: too many pending connections, dropping one");
        continue;
      }
      pending_.emplace_back(std::move(s));
    }
  }

  void service(size_t index) {
    Connection& c = pending_[index];
    try {
      if (!c.read.advance(c.socket)) return;
      if (!c.headerDone) {
        auto header = parseFrameHeader(c.read.bytes().first<kFrameHeaderBytes>(), secret_, kMaxHelloBytes);
        if (header.type != FrameType::Hello) throw Error(loomRemoteError, "expected a Hello frame");
        c.headerDone = true;
        c.read.expect(header.length);
        if (header.length > 0) return;
      }
      Hello hello = Hello::decode(c.read.bytes());
      net::Socket socket = std::move(c.socket);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(index));
      admit(std::move(socket), std::move(hello));
    } catch (const Error& e) {
      LOOM_WARN(Bootstrap, "rendezvous root dropped a connection: %s", e.what());
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(index));
    }
  }

  void admit(net::Socket socket, Hello hello) {
    socket.setLabel("rank " + std::to_string(hello.rank));
    if (failure_.empty()) {
      if (nranks_ == 0) nranks_ = hello.nranks;
      if (hello.nranks != nranks_) {
        failure_ = "rank " + std::to_string(hello.rank) + " was started with nranks=" + std::to_string(hello.nranks) +
                   " but rank " + std::to_string(arrivals_.front().info.rank) + " with nranks=" + std::to_string(nranks_);
      } else if (hello.rank < 0 || hello.rank >= nranks_) {
        failure_ = "rank " + std::to_string(hello.rank) + " is out of range for nranks=" + std::to_string(nranks_);
      } else if (std::any_of(arrivals_.begin(), arrivals_.end(),
                             [&](const Arrival& a) { return a.info.rank == hello.rank; })) {
        failure_ = "rank " + std::to_string(hello.rank) + " was claimed by two processes (duplicate rank)";
      }
      if (!failure_.empty()) {
        LOOM_WARN(Bootstrap, "rendezvous failed: %s", failure_.c_str());
        for (auto& a : arrivals_) answer(a.socket, loomInvalidArgument, failure_, {});
        arrivals_.clear();
      }
    }
    if (!failure_.empty()) {
      answer(socket, loomInvalidArgument, failure_, {});
      return;
    }
    hello.info.rank = hello.rank;
    arrivals_.push_back({std::move(socket), std::move(hello.info)});
  }

  std::string timeoutMessage() const {
    std::vector<bool> seen(static_cast<size_t>(std::max(nranks_, 0)), false);
    for (const auto& a : arrivals_) seen[static_cast<size_t>(a.info.rank)] = true;
    std::string missing;
    for (size_t r = 0; r < seen.size(); ++r) {
      if (!seen[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    return "rendezvous timed out after " + std::to_string(timeout_.count()) + " ms: rank(s) " + missing + " of " +
           std::to_string(nranks_) + " never arrived";
  }

  void answerAll(loomResult_t status, const std::string& message) {
    std::vector<PeerInfo> peers;
    if (status == loomSuccess) {
      peers.resize(static_cast<size_t>(nranks_));
      for (auto& a : arrivals_) peers[static_cast<size_t>(a.info.rank)] = a.info;
    } else {
      LOOM_WARN(Bootstrap, "%s", message.c_str());
    }
    for (auto& a : arrivals_) answer(a.socket, status, message, peers);
  }

  void answer(net::Socket& socket, loomResult_t status, const std::string& message,
              const std::vector<PeerInfo>& peers) {
    try {
      auto payload = RootReply{status, message, peers}.encode();
      sendFrame(socket, FrameType::RootReply, secret_, payload, Deadline::after(std::chrono::seconds(5)), &cancel_);
    } catch (const Error& e) {
      LOOM_WARN(Bootstrap, "rendezvous root could not answer %s: %s", socket.label().c_str(), e.what());
    }
  }

  net::Socket listener_;
  Secret secret_;
  std::chrono::milliseconds timeout_;
  Deadline deadline_;
  Cancellation cancel_;
  std::vector<Connection> pending_;
  std::vector<Arrival> arrivals_;
  int nranks_ = 0;
  std::string failure_;
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: starts after every other member exists
};

struct RootRegistry {
  std::mutex mutex;
  std::vector<std::unique_ptr<RootServer>> roots;

  void reap() {
    std::erase_if(roots, [](const auto& r) { return r->finished(); });
  }
};

RootRegistry& rootRegistry() {
  // Log before the registry exists, so the logger is built first and outlives
  // the roots that the registry stops at exit.
  (void)logEnabled(LogLevel::Warn, Subsys::Bootstrap);
  static RootRegistry instance;
  return instance;
}

}  // namespace

void startRendezvousRoot(net::Socket listener, const Secret& secret, std::chrono::milliseconds timeout) {
  RootRegistry& r = rootRegistry();
  std::lock_guard lock(r.mutex);
  r.reap();
  r.roots.push_back(std::make_unique<RootServer>(std::move(listener), secret, timeout));
}

void reapRendezvousRoots() {
  RootRegistry& r = rootRegistry();
  std::lock_guard lock(r.mutex);
  r.reap();
}

size_t runningRendezvousRoots() {
  RootRegistry& r = rootRegistry();
  std::lock_guard lock(r.mutex);
  r.reap();
  return r.roots.size();
}

}  // namespace loom
