#include "collectives/links.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>

#include "comm/base/error.hpp"

namespace loom::coll {

Links::Links(Engine& engine, std::string what) : engine_(engine), what_(std::move(what)) {}

Links::~Links() = default;

transport::SendConnection& Links::to(int peer) {
  auto it = std::find_if(used_.begin(), used_.end(), [&](const Used& u) { return u.peer == peer && u.send; });
  if (it != used_.end()) return *it->send;
  auto& connection = engine_.collectiveSend(peer);
  used_.push_back({peer, &connection, nullptr, std::nullopt});
  return connection;
}

transport::RecvConnection& Links::from(int peer) {
  auto it = std::find_if(used_.begin(), used_.end(), [&](const Used& u) { return u.peer == peer && u.recv; });
  if (it != used_.end()) return *it->recv;
  transport::RecvConnection* connection = nullptr;
  waitUntil([&] { return (connection = engine_.collectiveRecv(peer)) != nullptr; }, peer);
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
  engine_.throwIfCancelled(what_);
  const auto timeout = engine_.context().timeout;
  if (std::chrono::steady_clock::now() - since > timeout) {
    throw Error(loomTimeout, what_ + ": nothing moved to or from rank " + std::to_string(peer) + " for " +
                                 std::to_string(timeout.count()) + " ms (LOOM_TIMEOUT_MS)");
  }
  switch (backoff.next()) {
    case Backoff::Phase::Spin:
      for (int i = 0; i < 16; ++i) cpuRelax();
      return;
    case Backoff::Phase::Yield:
      ::sched_yield();
      return;
    case Backoff::Phase::Sleep: break;
  }
  std::vector<transport::WaitFd> waits;
  for (const auto& u : used_) {
    if (!u.lost) u.send ? u.send->addWaitFds(waits) : u.recv->addWaitFds(waits);
  }
  std::vector<pollfd> fds;
  for (const auto& w : waits) fds.push_back({w.fd, w.events, 0});
  if (engine_.cancelFd() >= 0) fds.push_back({engine_.cancelFd(), POLLIN, 0});
  const timespec sleep = toTimespec(backoff.sleepTime());
  if (::ppoll(fds.data(), fds.size(), &sleep, nullptr) < 0 && errno != EINTR) throwSystemError("ppoll", errno);
  for (auto& u : used_) {
    if (u.lost) continue;
    try {
      u.send ? u.send->checkAlive() : u.recv->checkAlive();
    } catch (const Error& e) {
      u.lost = e;
    }
  }
}

}  // namespace loom::coll
