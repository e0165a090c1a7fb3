// The progress engine of one communicator: its connections, the operations
// posted on them, and the listener that accepts its peers' connections.
//
// Threading: there is no progress thread. Whichever thread waits for an
// operation — the caller of a blocking call, or a host stream's worker —
// drives progress() for everything posted on the engine, under a lock that a
// second waiter does not queue for (it backs off and checks its own ops).
// See docs/DESIGN.md, "Progress".
//
// Per peer and direction, operations complete in posting order (one queue
// each); different peers and directions progress independently, so a group
// of sends and receives to many peers cannot deadlock.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "comm/engine/p2p_op.hpp"
#include "memory/registration.hpp"
#include "transport/listener.hpp"
#include "transport/transport.hpp"

namespace loom {

class Engine {
 public:
  Engine(transport::Context context, std::vector<transport::Endpoint> endpoints, net::Socket listener);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues ops behind earlier ones to the same peer and direction.
  void post(std::span<P2pOp* const> ops);
  // Takes back ops that have not finished (after a failure or an abort). A
  // connection left in the middle of a message is unusable afterwards.
  void withdraw(std::span<P2pOp* const> ops);

  // Advances every posted op as far as it can without waiting; true if
  // anything moved. Returns false at once if another thread is progressing.
  bool progress();
  // fds a waiter may sleep on: the connections that ops wait for.
  void addWaitFds(std::vector<transport::WaitFd>& out);
  // After a sleep: checks the connections that ops wait for, failing the
  // ops of any whose peer is gone, and fails every op with loomInvalidUsage
  // when a collective's slot waits where no receive is posted while this
  // rank's ops belong to another collective of that number, or to a later
  // one (a stray: the ranks are out of step, and may wait on each other
  // without ever reading the slot that shows it).
  void checkPeers();

  // A new connection to `peer` on `channel`, by the transport that serves
  // the path (the caller owns it; the engine's own are the point-to-point
  // channel's).
  std::unique_ptr<transport::SendConnection> connect(int peer, transport::Channel channel);
  // The connection `peer` made to this rank on `channel`, once delivered
  // (the caller takes it); null until then.
  std::unique_ptr<transport::RecvConnection> claim(int from, transport::Channel channel);

  // The name of the transport that carries this rank's messages to `peer`
  // ("self" for its own rank): what a connection to it would use.
  const char* transportTo(int peer) const;
  // Whether a send of `bytes` of device memory to `peer` may go by handle
  // (by_handle.cpp): the peer shares this node over shared memory,
  // LOOM_SHM_SINGLE_COPY is on, the peer has not refused a handle, and the
  // message is larger than the connection's FIFO (a smaller one leaves the
  // sender before the receiver has posted, which a send by handle, waiting
  // for the receiver's copy, would not).
  bool sendsByHandle(int peer, size_t bytes);

  // Whether no message of this rank to itself can be in flight: it never
  // opened a connection to itself, on which every such message travels, and
  // queues no send or receive of its own. A group's sends to itself may then
  // pair with its receives from itself in order, one copy each, as the
  // engine would have matched them (group.cpp's copyToSelf).
  bool quietWithSelf();

  const transport::Context& context() const { return context_; }
  const std::vector<transport::Endpoint>& endpoints() const { return endpoints_; }
  int rank() const { return context_.self.rank; }
  int nranks() const { return static_cast<int>(endpoints_.size()); }

  bool cancelled() const { return context_.cancel != nullptr && context_.cancel->cancelled(); }
  // After loomCommAbort or a peer's failure: throws why, prefixed with `what`.
  void throwIfCancelled(const std::string& what) const {
    if (context_.cancel != nullptr) context_.cancel->throwIfCancelled(what);
  }
  int cancelFd() const { return context_.cancel != nullptr ? context_.cancel->fd() : -1; }

 private:
  struct Direction {
    std::deque<P2pOp*> queue;
    std::string broken;  // why this direction cannot be used any more
    // A socket receives the head op's message straight into its buffer
    // (RecvConnection::receiveInto) until the op leaves the queue.
    std::optional<transport::ReceiveInto> landing;
    const P2pOp* landingFor = nullptr;

    void removed(const P2pOp* op) {
      if (op != landingFor) return;
      landing.reset();
      landingFor = nullptr;
    }
  };
  struct Peer {
    std::unique_ptr<transport::SendConnection> send;  // point-to-point, guarded by mutex_
    std::unique_ptr<transport::RecvConnection> recv;
    Direction sends;
    Direction recvs;  // after recv: its landing goes first
    bool refusedHandles = false;  // this rank could not map one of the peer's handles
  };

  struct Step {
    bool moved;
    bool finished;
  };
  // Advances the ops of `direction` in order with `advance` until one does
  // not finish; fails one that moved nothing for the timeout (`silence` says how).
  template <class Advance>
  bool drive(Direction& direction, const char* silence, Advance advance);
  // checkPeers' stray search; under mutex_.
  void failOnStrays();
  bool progressSends(int rank, Peer& peer);
  bool progressRecvs(int rank, Peer& peer);
  // Messages by handle (by_handle.cpp). A send with a handle: its handle's
  // slot out, then true until the receiver has released it (`step` says
  // when it finished); false where its bytes go instead (the receiver
  // refused, before or on reading it). A receive: copies the message whose
  // handle `slot` holds, or refuses it, and releases the slot.
  bool sendByHandle(P2pOp& op, transport::SendConnection& connection, Step& step);
  void takeByHandle(P2pOp& op, const transport::RecvSlot& slot, int rank, Peer& peer);
  // A send by handle given up on (withdraw): withdraws the handle, or,
  // where the receiver has taken it, waits until it has released the slot
  // (or is gone, or LOOM_TIMEOUT_MS has passed), so that the caller may
  // free the buffer once this returns.
  void withdrawHandle(const P2pOp& op, transport::SendConnection& connection);
  // Fails the head op; a connection that broke, or one left mid-message,
  // fails everything queued behind it too and takes no more ops.
  void fail(Direction& direction, const Error& error);
  void complete(Direction& direction);
  void deliver(int from, transport::Channel channel, std::unique_ptr<transport::RecvConnection> connection);

  transport::Context context_;
  std::vector<transport::Endpoint> endpoints_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  std::vector<Peer> peers_;
  std::vector<int> active_;  // peers with queued ops
  std::vector<char> isActive_;
  memory::Mappings mappings_;  // of the peers' handles
  const bool singleCopy_;      // LOOM_SHM_SINGLE_COPY
  std::mutex mutex_;           // guards all of the above

  std::mutex incomingMutex_;
  std::map<std::pair<int, transport::Channel>, std::unique_ptr<transport::RecvConnection>> incoming_;  // not yet claimed

  std::unique_ptr<transport::Listener> listener_;  // last: stopped first
};

}  // namespace loom
