#include "comm/engine/group.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <map>
#include <memory>
#include <memory_resource>
#include <thread>
#include <utility>
#include <vector>

#include "base/copy_bytes.hpp"
#include "base/device/cuda.hpp"
#include "base/device/staging.hpp"
#include "base/error.hpp"
#include "comm/engine/engine.hpp"
#include "comm/engine/wait.hpp"
#include "memory/registration.hpp"

namespace loom::group {
namespace {

struct State {
  int depth = 0;
  std::vector<Creation> creations;
  std::vector<Call> calls;
};
thread_local State state;

// Calls grouped by `key`, each group in the order of `calls`.
template <class Key>
std::vector<std::pair<Key, std::vector<Call>>> splitBy(const std::vector<Call>& calls, Key Call::*key) {
  std::vector<std::pair<Key, std::vector<Call>>> groups;
  for (const auto& c : calls) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == c.*key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {c.*key, {}});
    it->second.push_back(c);
  }
  return groups;
}

// Sends and receives of device memory, once the work queued before the call
// is done (the legacy default stream's for a blocking call; a CUDA stream's
// task has waited for its own). Between ranks of one node a message larger
// than the FIFO goes by handle (by_handle.cpp), a receive taking it straight
// into its buffer. Otherwise they run over pinned host copies: a send's is
// filled here, before any op is posted, a receive's by its op (also where
// the sender's message comes as bytes). `staged[i]`: whether call i's
// buffer stands in pinned memory.
void stageDeviceBuffers(const std::vector<Call>& calls, std::pmr::vector<P2pOp>& ops, cuda::StagedCopies& staging,
                        std::pmr::vector<bool>& staged) {
  cuda::DeviceStream* copies = nullptr;
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto* p2p = std::get_if<PointToPoint>(&calls[i].what);
    if (p2p == nullptr || !p2p->device || p2p->bytes == 0 || ops[i].engine == nullptr) continue;
    if (copies == nullptr) {
      copies = &staging.stream();
      if (!cuda::onUserStream()) copies->afterDefaultStream();
    }
    if (p2p->kind == OpKind::Recv) {
      ops[i].deviceTarget = p2p->buffer;  // where a message that comes by handle goes
    } else if (ops[i].engine->sendsByHandle(p2p->peer, p2p->bytes)) {
      if (memory::Handle handle = memory::handleOf(p2p->buffer, p2p->bytes); handle.reachableByPeers()) {
        ops[i].handle = handle;
        continue;
      }
    }
    ops[i].buffer = staging.lease(p2p->bytes);
    staged[i] = true;
    if (p2p->kind == OpKind::Send) copies->copy(ops[i].buffer, p2p->buffer, p2p->bytes);
  }
  staging.synchronize();
}

// What the receives of device memory took in goes where the caller asked.
void unstageReceives(const std::vector<Call>& calls, const std::pmr::vector<P2pOp>& ops, cuda::StagedCopies& staging,
                     const std::pmr::vector<bool>& staged) {
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto* p2p = std::get_if<PointToPoint>(&calls[i].what);
    if (!staged[i] || p2p->kind != OpKind::Recv || ops[i].landedOnDevice) continue;
    staging.stream().copy(p2p->buffer, ops[i].buffer, p2p->bytes);
  }
  staging.synchronize();
}

// A rank's sends to itself and its receives from itself, paired in order
// as the engine would match them: where the sizes of a pair agree, one copy
// fills the receive, and neither goes to the engine, which would carry the
// message through a FIFO to itself (two copies, in slots) and, for device
// memory, stage both through pinned memory. Device memory is copied on the
// device, after the work queued before the call; host memory here. A group
// whose self sends and receives do not pair up, or a rank that may still
// have a message to itself in flight (Engine::quietWithSelf: an earlier
// send to itself alone), leaves them all to the engine (and its errors).
// Returns which calls it served (empty: none, the common case, which
// allocates nothing).
std::vector<bool> copyToSelf(Communicator& comm, const std::vector<Call>& calls) {
  std::vector<bool> served;
  std::vector<size_t> sends, recvs;
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto* p2p = std::get_if<PointToPoint>(&calls[i].what);
    if (p2p == nullptr || p2p->peer != comm.rank()) continue;
    (p2p->kind == OpKind::Send ? sends : recvs).push_back(i);
  }
  if (sends.empty() || sends.size() != recvs.size() || !comm.engine().quietWithSelf()) return served;
  cuda::DeviceStream* copies = nullptr;
  for (size_t k = 0; k < sends.size(); ++k) {
    const auto& send = std::get<PointToPoint>(calls[sends[k]].what);
    const auto& recv = std::get<PointToPoint>(calls[recvs[k]].what);
    if (send.bytes != recv.bytes) continue;
    if (served.empty()) served.assign(calls.size(), false);
    served[sends[k]] = served[recvs[k]] = true;
    if (!send.device && !recv.device) {
      if (recv.buffer != send.buffer && send.bytes != 0) copyBytes(recv.buffer, send.buffer, send.bytes);
      continue;
    }
    if (copies == nullptr) {
      copies = &comm.staging.stream();
      if (!cuda::onUserStream()) copies->afterDefaultStream();
    }
    copies->copy(recv.buffer, send.buffer, send.bytes);
  }
  if (copies != nullptr) copies->synchronize(comm.deviceWaitCheck());
  return served;
}

// One communicator's calls: the collectives in order, then every
// point-to-point op posted at once and waited for together.
void runOneRank(const std::vector<Call>& calls) {
  for (const auto& call : calls) {
    if (const auto* collective = std::get_if<Collective>(&call.what)) collective->run();
  }
  const std::vector<bool> served = copyToSelf(*calls.front().comm, calls);
  // A group's ops live on this stack where they fit (a few sends and
  // receives), not in three allocations a call.
  std::array<std::byte, 4096> arena;
  std::pmr::monotonic_buffer_resource memory(arena.data(), arena.size());
  std::pmr::vector<P2pOp> ops(calls.size(), &memory);
  std::pmr::vector<P2pOp*> pointers(&memory);
  pointers.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto* p2p = std::get_if<PointToPoint>(&calls[i].what);
    if (p2p == nullptr || (!served.empty() && served[i])) continue;
    ops[i].engine = &calls[i].comm->engine();
    ops[i].kind = p2p->kind;
    ops[i].peer = p2p->peer;
    ops[i].buffer = p2p->buffer;
    ops[i].bytes = p2p->bytes;
    pointers.push_back(&ops[i]);
  }
  if (pointers.empty()) return;
  Communicator& comm = *calls.front().comm;
  cuda::StagedCopies staging(comm.staging, comm.deviceWaitCheck());
  std::pmr::vector<bool> staged(calls.size(), false, &memory);
  stageDeviceBuffers(calls, ops, staging, staged);
  try {
    runOps(pointers);
    unstageReceives(calls, ops, staging, staged);
  } catch (const Error& e) {
    if (e.code() != loomTimeout && e.code() != loomRemoteError) throw;
    // A deadline on a peer that answers nothing out of band either: the
    // link between the two is down, which is every rank's error.
    const int peer = e.code() == loomTimeout ? timedOutPeer(pointers) : -1;
    if (peer >= 0) comm.throwIfLinkDown(peer, e.what());
    comm.awaitRootCause("");
    throw;
  }
}

// Runs calls that this thread waits for. Where they span several
// communicators (one thread driving several ranks of this process, NCCL's
// one-thread-many-devices idiom), every rank's share starts at once: this
// thread takes the first communicator's, each other communicator's group
// worker its own. Run one after another, the first rank's collective would
// wait on a peer that this same thread had not started yet.
void runNow(const std::vector<Call>& calls) {
  if (calls.empty()) return;  // a group whose every call was refused
  const auto oneRank = [&](const Call& c) { return c.comm == calls.front().comm; };
  if (std::all_of(calls.begin(), calls.end(), oneRank)) {  // no copies in the common case
    const cuda::DeviceScope device(calls.front().device);
    try {
      return runOneRank(calls);
    } catch (const Error& e) {
      calls.front().comm->setLastError(e.what());  // loomGetLastError(comm) after loomGroupEnd
      throw;
    }
  }
  auto ranks = splitBy(calls, &Call::comm);
  for (size_t i = 1; i < ranks.size(); ++i) {
    const std::vector<Call>& share = ranks[i].second;
    // A share of a task a CUDA stream waits for is such a task too (staging.hpp).
    ranks[i].first->groupWorker().enqueue([&share, onStream = cuda::onUserStream()] {
      cuda::UserStreamScope scope(onStream);
      const cuda::DeviceScope device(share.front().device);
      runOneRank(share);
    });
  }
  // Every worker is waited for before `ranks` goes, whatever failed.
  std::exception_ptr first;
  try {
    const cuda::DeviceScope device(ranks[0].second.front().device);
    runOneRank(ranks[0].second);
  } catch (const Error& e) {
    ranks[0].first->setLastError(e.what());
    first = std::current_exception();
  } catch (...) {
    first = std::current_exception();
  }
  for (size_t i = 1; i < ranks.size(); ++i) {
    try {
      ranks[i].first->groupWorker().synchronize();
    } catch (const Error& e) {
      ranks[i].first->setLastError(e.what());
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

// A stream task's place in its communicators' streamTasks (destroying or
// aborting a communicator waits for zero), held by the task itself: it ends
// when the task is destroyed, whether the task ran, gave up waiting for its
// CUDA stream, or was refused.
class TaskCount {
 public:
  explicit TaskCount(std::vector<Communicator*> comms) : comms_(std::move(comms)) {
    for (Communicator* comm : comms_) comm->streamTasks.fetch_add(1, std::memory_order_acq_rel);
  }
  ~TaskCount() {
    for (Communicator* comm : comms_) comm->streamTasks.fetch_sub(1, std::memory_order_acq_rel);
  }
  TaskCount(const TaskCount&) = delete;
  TaskCount& operator=(const TaskCount&) = delete;
  const std::vector<Communicator*>& comms() const { return comms_; }

 private:
  std::vector<Communicator*> comms_;
};

// One task on `stream`. A stream may refuse it (a CUDA stream being
// captured into a graph: cuda_stream.hpp), and a task that first waits for
// a CUDA stream's work gives up when any of its communicators is aborted or
// revoked.
void enqueue(HostStream& stream, std::vector<Call> calls) {
  std::vector<Communicator*> comms;
  for (const auto& c : calls) comms.push_back(c.comm);
  auto count = std::make_shared<const TaskCount>(std::move(comms));
  auto giveUp = [count] {
    for (Communicator* comm : count->comms()) {
      if (comm->cancelled()) comm->requireReady();
    }
  };
  // A CUDA stream's gate goes on the stream from its own device, which the
  // calls on it were made on (not the device current at loomGroupEnd).
  const cuda::DeviceScope device(calls.front().device);
  stream.enqueue(
      [calls = std::move(calls), count] {
        try {
          runNow(calls);
        } catch (const Error& e) {
          for (const auto& c : calls) c.comm->setLastError(e.what());
          throw;
        }
      },
      std::move(giveUp));
}

// Resident sends and receives, queued per communicator and CUDA stream
// together (their channels run side by side), in call order.
void queueResident(const std::vector<Call>& calls) {
  struct Ops {
    int device = 0;  // the stream's (where its calls were made)
    std::vector<ResidentOp> ops;
  };
  std::map<std::pair<Communicator*, void*>, Ops> groups;
  for (const Call& c : calls) {
    const auto* p2p = std::get_if<ResidentPointToPoint>(&c.what);
    if (p2p == nullptr) continue;
    Ops& group = groups[{c.comm, p2p->stream}];
    group.device = c.device;
    group.ops.push_back(p2p->op);
  }
  for (const auto& [key, group] : groups) {
    const cuda::DeviceScope device(group.device);
    ResidentArea* area = key.first->resident();
    if (area == nullptr) throw Error(loomInternalError, "a resident send or receive on a communicator without its area");
    queueResidentPointToPoint(*area, group.ops, key.second);
  }
}

// Enters at their communicators' entry gates (comm/entry_gate.hpp) every
// call and message of `calls`, then passes the gates, before any of it is
// queued: where this thread drives several ranks of one GPU, each of their
// calls finds the others entered, and none is queued while a peer it waits
// for may still be held. What holds a CUDA stream (resident, or through the
// host behind the stream's gate) waits for its peers' entries; the rest is
// only numbered.
void passGates(const std::vector<Call>& calls) {
  struct Messages {
    std::vector<ResidentOp> resident;
    std::vector<EntryGate::Message> onStream;  // through the host, on a CUDA stream
    std::vector<EntryGate::Message> numbered;  // through the host, holding no CUDA stream
  };
  std::map<Communicator*, Messages> messages;
  std::vector<Communicator*> entered;
  for (const Call& c : calls) {
    if (!c.comm->gated()) continue;
    if (const auto* p2p = std::get_if<ResidentPointToPoint>(&c.what)) {
      messages[c.comm].resident.push_back(p2p->op);
    } else if (const auto* op = std::get_if<PointToPoint>(&c.what)) {
      if (op->bytes == 0) continue;  // nothing on either side
      const bool send = op->kind == OpKind::Send;
      // A send through the host leaves once its bytes are in the
      // connection's FIFO; a larger one waits for its receiver.
      const bool taken = send && op->bytes > c.comm->engine().context().fifo.totalBytes();
      Messages& m = messages[c.comm];
      (c.cudaStream ? m.onStream : m.numbered)
          .push_back({.peer = op->peer, .send = send, .pieces = 1, .takenAtEnd = taken});
    } else {
      const auto* s = std::get_if<OnStream>(&c.what);
      c.comm->enterCall(s != nullptr ? s->resident : c.cudaStream);
    }
    entered.push_back(c.comm);
  }
  std::sort(entered.begin(), entered.end());
  entered.erase(std::unique(entered.begin(), entered.end()), entered.end());
  try {
    for (auto& [comm, m] : messages) {
      if (!m.resident.empty()) {
        ResidentArea* area = comm->resident();
        if (area == nullptr) throw Error(loomInternalError, "a resident send or receive on a communicator without its area");
        comm->enterMessages(residentMessages(*area, m.resident), true);
      }
      comm->enterMessages(m.onStream, true);
      comm->enterMessages(m.numbered, false);
    }
    for (Communicator* comm : entered) comm->passGate();
  } catch (...) {
    for (Communicator* comm : entered) comm->leaveGate();
    throw;
  }
}

// `calls` is the caller's to give up: the resident and on-stream calls are
// taken out of it as they are queued.
void execute(std::vector<Call>& calls) {
  passGates(calls);
  const auto resident = [](const Call& c) { return std::holds_alternative<ResidentPointToPoint>(c.what); };
  if (std::any_of(calls.begin(), calls.end(), resident)) {
    queueResident(calls);
    std::erase_if(calls, resident);
    if (calls.empty()) return;
  }
  const auto onStream = [](const Call& c) { return std::holds_alternative<OnStream>(c.what); };
  if (std::any_of(calls.begin(), calls.end(), onStream)) {
    for (const Call& c : calls) {
      if (!onStream(c)) continue;
      const cuda::DeviceScope device(c.device);
      std::get<OnStream>(c.what).enqueue();
    }
    std::erase_if(calls, onStream);
  }
  if (std::all_of(calls.begin(), calls.end(), [](const Call& c) { return c.stream == nullptr; })) {
    return runNow(calls);  // the common case, a blocking call or group: nothing to split
  }
  // Each stream's calls, in order, become one task of it; the rest run here.
  std::vector<Call> blocking;
  for (auto& [stream, streamCalls] : splitBy(calls, &Call::stream)) {
    if (stream == nullptr) {
      blocking = std::move(streamCalls);
    } else {
      enqueue(*stream, std::move(streamCalls));
    }
  }
  if (!blocking.empty()) runNow(blocking);
}

// Every creation at once, each on a thread of its own under its rank's
// device: a rendezvous ends only when all of its ranks have come. Every
// thread is joined before the first failure is thrown.
bool create(const std::vector<Creation>& creations) {
  if (creations.empty()) return false;
  std::vector<std::exception_ptr> errors(creations.size());
  std::vector<std::thread> threads;
  threads.reserve(creations.size());
  for (size_t i = 0; i < creations.size(); ++i) {
    threads.emplace_back([&creations, &errors, i] {
      try {
        const cuda::DeviceScope device(creations[i].device);
        creations[i].run();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return std::any_of(creations.begin(), creations.end(), [](const Creation& c) { return !c.blocking; });
}

}  // namespace

void start() { ++state.depth; }

bool end() {
  if (state.depth == 0) throw Error(loomInvalidUsage, "loomGroupEnd without a matching loomGroupStart");
  if (--state.depth > 0) return false;
  const std::vector<Creation> creations = std::exchange(state.creations, {});
  std::vector<Call> calls;
  calls.swap(state.calls);
  const bool inProgress = create(creations);
  execute(calls);
  // The list goes back, emptied, for the thread's next group to fill without
  // growing it again (unless a group made during this one has one already).
  calls.clear();
  if (state.calls.empty()) state.calls.swap(calls);
  return inProgress;
}

bool defer(Creation creation) {
  if (state.depth == 0) return false;
  creation.device = cuda::currentDevice();
  state.creations.push_back(std::move(creation));
  return true;
}

bool deferred(const HostStream* stream) { return state.depth > 0 || stream != nullptr; }

void submit(const Call& call) {
  Call noted = call;
  noted.device = cuda::currentDevice();
  if (state.depth > 0) {
    state.calls.push_back(std::move(noted));
    return;
  }
  std::vector<Call> one{std::move(noted)};
  execute(one);
}

}  // namespace loom::group
