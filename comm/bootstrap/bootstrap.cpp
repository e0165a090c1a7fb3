#include "comm/bootstrap/bootstrap.hpp"

#include <cstring>

#include "base/error.hpp"
#include "base/log.hpp"
#include "comm/bootstrap/frame.hpp"
#include "comm/bootstrap/rendezvous.hpp"

namespace loom {
namespace {
// How long a connection on our listener may take to present itself before it
// is dropped; bounds the harm a silent stranger can do.
constexpr auto kHelloGrace = std::chrono::seconds(2);
}  // namespace

Bootstrap::Bootstrap(const UniqueIdData& id, int rank, int nranks, PeerInfo self, net::Socket listener,
                     std::chrono::milliseconds timeout, const Cancellation* cancel)
    : rank_(rank), nranks_(nranks), timeout_(timeout), cancel_(cancel), listener_(std::move(listener)), secret_(id.secret) {
  auto deadline = Deadline::after(timeout);
  peers_ = rendezvous(id, rank, nranks, self, timeout, cancel);
  if (nranks_ > 1) connectRing(id.secret, deadline);
}

void Bootstrap::watch(Watchdog::Settings settings, Watchdog::Handlers handlers) {
  if (nranks_ == 1) {
    listener_.close();
    return;
  }
  std::vector<std::string> addresses;
  for (const auto& p : peers_) addresses.push_back(p.bootstrapAddress);
  watchdog_ = std::make_unique<Watchdog>(secret_, rank_, std::move(addresses), std::move(listener_), settings,
                                         std::move(handlers));
}

void Bootstrap::connectRing(const Secret& secret, Deadline deadline) {
  int next = (rank_ + 1) % nranks_;
  int prev = (rank_ + nranks_ - 1) % nranks_;
  const auto& nextInfo = peers_[static_cast<size_t>(next)];
  next_ = net::Socket::connect(net::SocketAddress::parse(nextInfo.bootstrapAddress), deadline, cancel_,
                               "rank " + std::to_string(next) + " at " + nextInfo.bootstrapAddress);
  ByteWriter hello;
  hello.put(static_cast<int32_t>(rank_));
  sendFrame(next_, FrameType::RingHello, secret, hello.bytes(), deadline, cancel_);

  while (!prev_.valid()) {
    net::Socket candidate = listener_.accept(deadline, cancel_);
    try {
      auto payload = recvFrame(candidate, FrameType::RingHello, secret, 64, deadline.capped(kHelloGrace), cancel_);
      ByteReader r(payload, "RingHello");
      int from = r.get<int32_t>();
      r.expectEnd();
      if (from != prev) throw Error(loomRemoteError, "ring hello from rank " + std::to_string(from) + ", expected " +
                                                         std::to_string(prev));
      candidate.setLabel("rank " + std::to_string(prev) + " at " + peers_[static_cast<size_t>(prev)].bootstrapAddress);
      prev_ = std::move(candidate);
    } catch (const Error& e) {
      if (e.code() == loomInvalidUsage || deadline.expired()) throw;  // aborted, or our own deadline
      LOOM_WARN(Bootstrap, "dropped a connection to the bootstrap listener: %s", e.what());
    }
  }
  LOOM_INFO(Bootstrap, "ring connected: prev %d, next %d", prev, next);
}

void Bootstrap::allgather(std::span<std::byte> buffer, size_t blockBytes) {
  if (buffer.size() != blockBytes * static_cast<size_t>(nranks_)) {
    throw Error(loomInternalError, "bootstrap allgather buffer has the wrong size");
  }
  auto deadline = Deadline::after(timeout_);
  // Step s: pass on the block that arrived s steps ago, receive the one before it.
  for (int s = 0; s < nranks_ - 1; ++s) {
    size_t sendBlock = static_cast<size_t>((rank_ - s + nranks_) % nranks_);
    size_t recvBlock = static_cast<size_t>((rank_ - s - 1 + nranks_) % nranks_);
    net::Socket::exchange(next_, buffer.subspan(sendBlock * blockBytes, blockBytes), prev_,
                          buffer.subspan(recvBlock * blockBytes, blockBytes), deadline, cancel_);
  }
}

void Bootstrap::barrier() {
  std::vector<std::byte> tokens(static_cast<size_t>(nranks_));
  allgather(tokens, 1);
}

}  // namespace loom
