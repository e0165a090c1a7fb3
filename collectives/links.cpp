#include "collectives/links.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>

#include "base/error.hpp"
#include "collectives/call_signature.hpp"

namespace loom::coll {

Links::Links(Communicator& comm, CollectiveChannel& channel, std::string what, uint32_t sequence, uint32_t call,
             uint64_t bytes)
    : engine_(comm.engine()),
      channel_(channel),
      what_(std::move(what)),
      sequence_(sequence),
      call_(call),
      progress_(comm.progress),
      probe_(comm, sequence, call, bytes) {}

Links::~Links() = default;

transport::SendConnection& Links::to(int peer) {
  auto it = std::find_if(used_.begin(), used_.end(), [&](const Used& u) { return u.peer == peer && u.send; });
  if (it != used_.end()) return *it->send;
  progress_.sentTo(peer);  // before anything goes: a probing peer learns that something is on its way
  auto& connection = channel_.send(peer);
  used_.push_back({peer, &connection, nullptr, std::nullopt});
  return connection;
}

transport::RecvConnection& Links::from(int peer) {
  auto it = std::find_if(used_.begin(), used_.end(), [&](const Used& u) { return u.peer == peer && u.recv; });
  if (it != used_.end()) return *it->recv;
  transport::RecvConnection* connection = nullptr;
  waitUntil([&] { return (connection = channel_.recv(peer)) != nullptr; }, peer);
  used_.push_back({peer, nullptr, connection, std::nullopt});
  return *connection;
}

void Links::flush() {
  for (const auto& u : used_) {
    if (u.send) waitUntil([&] { return u.send->flushed(); }, u.peer);
  }
}

void Links::throwIfLost(int peer) const {
  for (const auto& u : used_) {
    if (u.peer == peer && u.lost) throw Error(u.lost->code(), what_ + ": " + u.lost->what());
  }
}

bool Links::progressAll() {
  bool moved = false;
  for (auto& u : used_) {
    if (u.lost) continue;
    try {
      moved |= u.send ? u.send->progress() : u.recv->progress();
    } catch (const Error& e) {
      u.lost = e;
      moved = true;  // the waiter looks again: what it waits for may have arrived first
    }
  }
  return moved;
}

void Links::pause(Backoff& backoff, std::chrono::steady_clock::time_point since, int peer) {
  backoff.idle(
      [&](Backoff::Phase) {
        engine_.throwIfCancelled(what_);
        const auto timeout = engine_.context().timeout;
        if (std::chrono::steady_clock::now() - since > timeout) {
          const std::string stalled = "nothing moved to or from rank " + std::to_string(peer) + " for " +
                                      std::to_string(timeout.count()) + " ms (LOOM_TIMEOUT_MS)";
          probe_.throwIfDark(peer, stalled);  // the communicator's revocation names the call
          throw Error(loomTimeout, what_ + ": " + stalled);
        }
      },
      [&](std::chrono::microseconds timeout) { sleepOnLinks(timeout, since, peer); });
}

// Sleeps in poll() on the connections in use and the abort, then looks at
// what a sleeper should: lost connections, strays from other calls, and
// where the peer it waits on is (the stall probe).
void Links::sleepOnLinks(std::chrono::microseconds timeout, std::chrono::steady_clock::time_point since, int peer) {
  std::vector<transport::WaitFd> waits;
  for (const auto& u : used_) {
    if (!u.lost) u.send ? u.send->addWaitFds(waits) : u.recv->addWaitFds(waits);
  }
  std::vector<pollfd> fds;
  for (const auto& w : waits) fds.push_back({w.fd, w.events, 0});
  if (engine_.cancelFd() >= 0) fds.push_back({engine_.cancelFd(), POLLIN, 0});
  const timespec sleep = toTimespec(timeout);
  if (::ppoll(fds.data(), fds.size(), &sleep, nullptr) < 0 && errno != EINTR) throwSystemError("ppoll", errno);
  for (auto& u : used_) {
    if (u.lost) continue;
    try {
      u.send ? u.send->checkAlive() : u.recv->checkAlive();
    } catch (const Error& e) {
      u.lost = e;
    }
  }
  lookForStrays();
  probe_.check(peer, std::chrono::steady_clock::now() - since, what_);
}

void Links::lookForStrays() {
  for (int peer = 0; peer < engine_.nranks(); ++peer) {
    transport::RecvConnection* in = peer == engine_.rank() ? nullptr : channel_.recv(peer);
    if (in == nullptr) continue;
    const bool used = std::any_of(used_.begin(), used_.end(), [&](const Used& u) { return u.recv == in; });
    std::optional<transport::RecvSlot> slot;
    try {
      if (!used) in->progress();  // a socket takes in what waits for it; one in use progresses anyway
      slot = in->peek();
    } catch (const Error&) {
      continue;  // a lost connection that this call does not wait on is no concern of it
    }
    if (!slot) continue;
    const auto behind = static_cast<int32_t>(slot->tag.message - sequence_) < 0;
    const bool otherCall = slot->tag.message == sequence_ && slot->tag.call != call_;
    if (!behind && !otherCall) continue;
    const transport::SlotTag ours{.messageBytes = slot->tag.messageBytes, .message = sequence_, .call = call_};
    throw Error(loomInvalidUsage, what_ + ": rank " + std::to_string(peer) + " sent " +
                                      describeCollectiveMessage(slot->tag) + " while this rank is in " +
                                      describeCollectiveMessage(ours) +
                                      " (every rank must make the same calls in the same order, with matching "
                                      "counts, types, ops, roots and peers)");
  }
}

}  // namespace loom::coll
