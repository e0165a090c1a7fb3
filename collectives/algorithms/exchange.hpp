// The direct algorithms' tool: point-to-point operations of one collective,
// all posted at once on the engine (the point-to-point channel) and waited
// for together, so the engine interleaves them and nothing waits on a ring.
#pragma once

#include <deque>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/call_signature.hpp"
#include "collectives/stall_probe.hpp"
#include "comm/engine/wait.hpp"

namespace loom::coll {

class Exchange {
 public:
  explicit Exchange(const Plan& plan) : plan_(plan) {}

  void send(int peer, const std::byte* buffer, size_t bytes) {
    plan_.comm.progress.sentTo(peer);  // before it goes: a probing peer learns that something is on its way
    add(OpKind::Send, peer, const_cast<std::byte*>(buffer), bytes);
  }
  void recv(int peer, std::byte* buffer, size_t bytes) { add(OpKind::Recv, peer, buffer, bytes); }

  // Posts every operation added and returns when all have completed.
  void run() {
    std::vector<P2pOp*> pointers;
    for (auto& op : ops_) pointers.push_back(&op);
    StallProbe probe(plan_.comm, plan_.sequence, plan_.call, plan_.callBytes);
    try {
      runOps(pointers,
             [&](int peer, std::chrono::steady_clock::duration stalled) { probe.check(peer, stalled, plan_.what); });
    } catch (const Error& e) {
      // A deadline on a peer that is in this call too, or answers nothing:
      // the link between the two is down, which is every rank's error.
      const int peer = e.code() == loomTimeout ? timedOutPeer(pointers) : -1;
      if (peer >= 0) probe.throwIfDark(peer, e.what());  // the communicator's revocation names the call
      throw;
    }
    ops_.clear();
  }

 private:
  void add(OpKind kind, int peer, std::byte* buffer, size_t bytes) {
    P2pOp& op = ops_.emplace_back();
    op.engine = &plan_.comm.engine();
    op.kind = kind;
    op.peer = peer;
    op.buffer = buffer;
    op.bytes = bytes;
    op.messageId = plan_.sequence;
    op.call = plan_.call;
    op.describeMessage = describeCollectiveMessage;
  }

  const Plan& plan_;
  std::deque<P2pOp> ops_;  // a deque: ops never move once added
};

}  // namespace loom::coll
