#include "transport/listener.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <list>

#include "base/affinity.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/net/partial_read.hpp"
#include "transport/handshake.hpp"

namespace loom::transport {
namespace {

// A client gets this long to present its Hello (a real rank sends it at once).
constexpr auto kHelloGrace = std::chrono::seconds(5);

}  // namespace

struct Listener::Pending {
  net::Socket socket;
  net::PartialRead hello{Hello::kBytes};
  Deadline deadline;
};

Listener::Listener(net::Socket socket, Context context, std::span<const std::unique_ptr<Transport>> transports,
                   Deliver deliver)
    : socket_(std::move(socket)),
      context_(std::move(context)),
      transports_(transports),
      deliver_(std::move(deliver)),
      stopFd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (stopFd_ < 0) throwSystemError("eventfd", errno);
  thread_ = std::thread([this] { run(); });
}

Listener::~Listener() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(stopFd_, &one, sizeof one);
  thread_.join();
  ::close(stopFd_);
}

void Listener::run() {
  // Segments this thread creates for receive FIFOs are populated here, so on the rank's NUMA node.
  ::pthread_setname_np(::pthread_self(), "loom-listener");
  bindThisThread(context_.cpus);
  std::list<Pending> pending;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({stopFd_, POLLIN, 0});
    fds.push_back({socket_.fd(), POLLIN, 0});
    for (const auto& p : pending) fds.push_back({p.socket.fd(), POLLIN, 0});
    int timeoutMs = pending.empty() ? -1 : 100;  // wakes to expire silent clients
    if (::poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) {
      LOOM_WARN(Net, "listener poll failed: errno %d", errno);
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents != 0) {
      try {
        pending.push_back({socket_.accept(Deadline::after(std::chrono::milliseconds(0)), nullptr), net::PartialRead(Hello::kBytes),
                           Deadline::after(kHelloGrace)});
      } catch (const Error& e) {
        LOOM_INFO(Net, "accept: %s", e.what());
      }
    }
    size_t i = 2;
    for (auto it = pending.begin(); it != pending.end(); ++i) {
      bool done = false;
      try {
        if (i < fds.size() && fds[i].revents != 0 && it->hello.advance(it->socket)) {
          onHello(it->socket, it->hello.bytes());
          done = true;
        } else if (it->deadline.expired()) {
          LOOM_WARN(Net, "dropped a data connection that sent no hello in time");
          done = true;
        }
      } catch (const Error& e) {
        LOOM_WARN(Net, "dropped a data connection: %s", e.what());
        done = true;
      }
      it = done ? pending.erase(it) : std::next(it);
    }
  }
}

void Listener::onHello(net::Socket& socket, std::span<const std::byte> bytes) {
  Hello hello = Hello::decode(bytes);
  if (!(hello.secret == context_.secret)) throw Error(loomRemoteError, "a hello with a wrong secret");
  if (hello.to != context_.self.rank) throw Error(loomRemoteError, "a hello for another rank");
  socket.setLabel("rank " + std::to_string(hello.from));
  for (const auto& t : transports_) {
    if (t->wireId() != hello.transport) continue;
    try {
      auto connection = t->accept(socket, hello, context_);
      if (connection) deliver_(hello.from, hello.channel, std::move(connection));
    } catch (const Error& e) {
      if (socket.valid()) {
        try {
          sendReply(socket, {.ok = false, .detail = e.what()}, Deadline::after(std::chrono::seconds(1)), nullptr);
        } catch (const Error&) {
        }
      }
      throw;
    }
    return;
  }
  throw Error(loomRemoteError, "a hello for an unknown transport");
}

}  // namespace loom::transport
