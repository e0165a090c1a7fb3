// The collective channel's connections that one collective uses, and the one
// way a collective waits on them: progress every connection in use (a socket
// moves bytes only when someone calls progress), back off as runOps does, and
// give up with a named error on LOOM_TIMEOUT_MS of silence, a dead peer or
// loomCommAbort.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "collectives/stall_probe.hpp"
#include "comm/communicator.hpp"
#include "base/backoff.hpp"
#include "comm/engine/engine.hpp"
#include "collectives/channel.hpp"
#include "transport/connection.hpp"

namespace loom::coll {

class Links {
 public:
  // `what` names the collective in errors ("allreduce #12"); `sequence`
  // and `call` are what its slots carry (call_signature.hpp), `bytes` its
  // count x datatype size (for the stall probe).
  Links(Communicator& comm, CollectiveChannel& channel, std::string what, uint32_t sequence, uint32_t call,
        uint64_t bytes);
  ~Links();  // flushes nothing: a successful run calls flush()
  Links(const Links&) = delete;
  Links& operator=(const Links&) = delete;

  transport::SendConnection& to(int peer);    // connects on first use
  transport::RecvConnection& from(int peer);  // waits for the peer to connect

  // Returns once ready() is true, progressing every connection in use
  // meanwhile; `peer` is whom it waits for, for the error message.
  template <class Ready>
  void waitUntil(Ready&& ready, int peer) {
    Backoff backoff;
    auto since = std::chrono::steady_clock::now();
    while (!ready()) {
      throwIfLost(peer);
      if (progressAll()) {
        backoff.reset();
        since = std::chrono::steady_clock::now();
        continue;
      }
      pause(backoff, since, peer);
    }
  }

  // Waits until every slot committed so far has left this process, so the
  // peers can finish without this rank's help.
  void flush();

  const std::string& what() const { return what_; }

 private:
  struct Used {
    int peer;
    transport::SendConnection* send;
    transport::RecvConnection* recv;
    std::optional<Error> lost;  // the connection failed; fatal only once waited on
  };
  // A peer that finished its part may close its connections while this rank
  // still reads what it sent, or waits on someone else: a failed connection
  // is recorded, and throws only when a wait for its peer cannot be met.
  void throwIfLost(int peer) const;
  bool progressAll();
  // One idle step (Backoff::idle): throws on abort or silence past the
  // timeout; in the sleep phase, sleepOnLinks.
  void pause(Backoff& backoff, std::chrono::steady_clock::time_point since, int peer);
  // Polls the connections' fds, checks that their peers live, and looks for strays.
  void sleepOnLinks(std::chrono::microseconds timeout, std::chrono::steady_clock::time_point since, int peer);
  // Throws loomInvalidUsage naming the peer when a slot waits on any
  // incoming connection that belongs to another call of this sequence
  // number, or to one this rank has finished: ranks out of step that wait on
  // each other in a cycle (a broadcast's receiver on its root, while the
  // root, in a reduce, waits on it) would otherwise never look at the slot
  // that shows it.
  void lookForStrays();

  Engine& engine_;
  CollectiveChannel& channel_;
  std::string what_;
  uint32_t sequence_;
  uint32_t call_;
  Progress& progress_;
  StallProbe probe_;
  std::vector<Used> used_;
};

}  // namespace loom::coll
