// loomGroupStart / loomGroupEnd. Point-to-point calls made between them are
// collected per thread and run together at the end: all their ops are posted
// before any is waited for, so a ring exchange or an all-to-all written with
// sends and receives cannot deadlock. Outside a group a call is a group of one.
//
// Calls on a NULL stream run in the calling thread, which returns when they
// are done; calls on a host stream become one task of that stream. Per
// communicator, a group's collectives run first, one after another in the
// order they were called (the order every rank shares), then its
// point-to-point calls together. A group that spans several communicators
// of this process (one thread driving several ranks) runs each one's share
// at once, on the communicators' group workers, so no rank waits on a peer
// this thread has not started.
//
// A communicator created inside a group (NCCL's idiom: one thread calls
// ncclCommInitRank for each of its ranks between ncclGroupStart and
// ncclGroupEnd) is created at the outermost end too, every one at once and
// before the group's calls: created at the call, the first rank would wait
// in the rendezvous for a rank this thread has not asked for yet.
#pragma once

#include <cstddef>
#include <functional>
#include <variant>

#include "comm/communicator.hpp"
#include "comm/engine/p2p_op.hpp"
#include "comm/engine/resident_p2p.hpp"
#include "comm/engine/stream.hpp"

namespace loom::group {

// A send or receive: one op the engine posts with the group's others.
struct PointToPoint {
  OpKind kind = OpKind::Send;
  int peer = -1;
  std::byte* buffer = nullptr;
  size_t bytes = 0;
  // The buffer is a CUDA device's: between ranks of one node the message
  // goes by handle, else the op runs over a pinned copy of it (the staged
  // device path), filled before a send, emptied after a receive (group.cpp).
  bool device = false;
};

// A collective: runs whole, blocking, in the thread that executes the group.
struct Collective {
  std::function<void()> run;
};

// Work the calling thread queues straight on the call's CUDA stream (a
// one-rank call on device memory: collectives/device_alone.hpp), with no
// host stream, gate or worker. Queued when its group ends, before the
// group's other calls (a group promises no order among its calls).
struct OnStream {
  std::function<void()> enqueue;
  // A resident call (collectives/resident_collectives.hpp), which waits on
  // the stream for its peers: entered at its communicator's gate
  // (Communicator::enterCall), which the group passes before any of its
  // work is queued.
  bool resident = false;
};

// A send or receive of device memory on a CUDA stream between ranks whose
// devices reach each other's (the communicator's resident area is ready):
// queued straight on `stream` when its group ends, with the group's others
// of that communicator and stream (comm/engine/resident_p2p.hpp).
struct ResidentPointToPoint {
  ResidentOp op;
  void* stream = nullptr;  // the cudaStream_t
};

struct Call {
  Communicator* comm;
  HostStream* stream;  // null: blocking (an OnStream's stream is its own)
  std::variant<PointToPoint, Collective, OnStream, ResidentPointToPoint> what;
  // A Collective or PointToPoint made on a CUDA stream (`stream` is that
  // stream's host stream): the CUDA stream waits for it, so it passes the
  // communicator's entry gate (Communicator::enterCall) first.
  bool cudaStream = false;
  // The CUDA device current where the call was made (submit() notes it): the
  // call runs there, whichever thread runs it and whatever device that
  // thread's caller made current since (NCCL's idiom of one thread driving
  // a rank per GPU sets each rank's device before its call in one group).
  int device = 0;
};

// The rest of a communicator's creation (its init, or a split), deferred
// to the group's end. `blocking` false: `run` only starts it (a
// non-blocking communicator) and the group's end reports it in progress.
struct Creation {
  std::function<void()> run;
  bool blocking = true;
  // The CUDA device current where it was asked for (defer() notes it):
  // the rank's device, whichever thread runs it.
  int device = 0;
};

void start();
// Runs what the outermost group collected: its creations, each on a thread
// of its own and all at once, then its calls. Throws the first failure;
// returns whether a non-blocking creation is still in progress.
bool end();
// Inside a group: records `creation` for the group's end and returns true.
// Outside: returns false, and the caller runs it now.
bool defer(Creation creation);
// Inside a group: records the call. Outside: runs it now.
void submit(const Call& call);
// Whether a call on `stream` from this thread would be recorded (inside a
// group) or queued (on a host stream) rather than run now. A caller that
// would run now may run it directly, without building a Call.
bool deferred(const HostStream* stream);

}  // namespace loom::group
