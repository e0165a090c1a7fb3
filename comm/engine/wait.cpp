#include "comm/engine/wait.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "base/error.hpp"
#include "base/backoff.hpp"

namespace loom {
namespace {

// The engines of `ops`, once each, with the ops grouped by engine.
struct Posting {
  Engine* engine;
  std::vector<P2pOp*> ops;
};
std::vector<Posting> byEngine(std::span<P2pOp* const> ops) {
  std::vector<Posting> out;
  // The usual case, one communicator: one posting of every op, two allocations.
  if (std::all_of(ops.begin(), ops.end(), [&](const P2pOp* op) { return op->engine == ops.front()->engine; })) {
    if (!ops.empty()) out.push_back({ops.front()->engine, std::vector<P2pOp*>(ops.begin(), ops.end())});
    return out;
  }
  for (P2pOp* op : ops) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Posting& p) { return p.engine == op->engine; });
    if (it == out.end()) it = out.insert(out.end(), Posting{op->engine, {}});
    it->ops.push_back(op);
  }
  return out;
}

// Sleeps in poll() on what the engines wait for, then lets them look at their
// peers: a readable control socket is a dead peer.
void sleepOn(std::span<const Posting> postings, std::chrono::microseconds timeout) {
  std::vector<transport::WaitFd> waits;
  for (const auto& p : postings) p.engine->addWaitFds(waits);
  std::vector<pollfd> fds;
  fds.reserve(waits.size() + postings.size());
  for (const auto& w : waits) fds.push_back({w.fd, w.events, 0});
  for (const auto& p : postings) {
    if (p.engine->cancelFd() >= 0) fds.push_back({p.engine->cancelFd(), POLLIN, 0});
  }
  const timespec sleep = toTimespec(timeout);
  if (::ppoll(fds.data(), fds.size(), &sleep, nullptr) < 0 && errno != EINTR) throwSystemError("ppoll", errno);
  for (const auto& p : postings) p.engine->checkPeers();
}

[[noreturn]] void abandon(std::span<const Posting> postings, loomResult_t code, const std::string& message) {
  for (const auto& p : postings) p.engine->withdraw(p.ops);
  throw Error(code, message);
}

}  // namespace

int timedOutPeer(std::span<P2pOp* const> ops) {
  for (const P2pOp* op : ops) {
    if (op->state.load(std::memory_order_acquire) == OpState::Failed && op->error == loomTimeout) return op->peer;
  }
  return -1;
}

void runOps(std::span<P2pOp* const> ops, const OnStall& onStall) {
  const auto postings = byEngine(ops);
  for (const auto& p : postings) p.engine->post(p.ops);
  Backoff backoff;
  size_t done = 0;  // ops[0, done) have finished well
  unsigned looks = 0;
  auto lastMoved = std::chrono::steady_clock::now();
  for (;;) {
    bool moved = false;
    for (const auto& p : postings) moved |= p.engine->progress();
    size_t firstPending = ops.size();
    for (size_t i = done; i < ops.size(); ++i) {
      OpState state = ops[i]->state.load(std::memory_order_acquire);
      if (state == OpState::Failed) abandon(postings, ops[i]->error, ops[i]->message);
      if (state == OpState::Pending && firstPending == ops.size()) firstPending = i;
    }
    done = firstPending;
    if (done == ops.size()) return;
    for (const auto& p : postings) {
      try {
        p.engine->throwIfCancelled({});
      } catch (const Error& e) {
        abandon(postings, e.code(), e.what());
      }
    }
    if (moved) {
      backoff.reset();
      lastMoved = std::chrono::steady_clock::now();
      continue;
    }
    backoff.idle(
        [&](Backoff::Phase phase) {
          // While yielding, a look at the peers now and then (a zero-time poll).
          if (phase == Backoff::Phase::Yield && ++looks % 256 == 0) sleepOn(postings, std::chrono::microseconds(0));
        },
        [&](std::chrono::microseconds timeout) {
          sleepOn(postings, timeout);
          if (!onStall) return;
          try {
            onStall(ops[done]->peer, std::chrono::steady_clock::now() - lastMoved);
          } catch (const Error& e) {
            abandon(postings, e.code(), e.what());
          }
        });
  }
}

}  // namespace loom
