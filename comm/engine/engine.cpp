#include "comm/engine/engine.hpp"
#include "transport/registry.hpp"

#include <algorithm>
#include <cstring>

#include "base/copy_bytes.hpp"
#include "base/device/cuda.hpp"
#include "base/env.hpp"
#include "base/log.hpp"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

void finish(P2pOp& op, OpState state) { op.state.store(state, std::memory_order_release); }

}  // namespace

std::string P2pOp::describe() const {
  return std::string(kind == OpKind::Send ? "send of " : "recv of ") + std::to_string(bytes) + " bytes " +
         (kind == OpKind::Send ? "to" : "from") + " rank " + std::to_string(peer);
}

Engine::Engine(transport::Context context, std::vector<transport::Endpoint> endpoints, net::Socket listener)
    : context_(std::move(context)),
      endpoints_(std::move(endpoints)),
      transports_(transport::allTransports()),
      peers_(endpoints_.size()),
      isActive_(endpoints_.size(), 0),
      singleCopy_(env::getInt("LOOM_SHM_SINGLE_COPY", 0, 1) == 1) {
  listener_ = std::make_unique<transport::Listener>(
      std::move(listener), context_, transports_,
      [this](int from, transport::Channel channel, std::unique_ptr<transport::RecvConnection> c) {
        deliver(from, channel, std::move(c));
      });
}

Engine::~Engine() { listener_.reset(); }  // no new connections while the old ones go

void Engine::deliver(int from, transport::Channel channel, std::unique_ptr<transport::RecvConnection> connection) {
  if (from < 0 || static_cast<size_t>(from) >= peers_.size()) {
    LOOM_WARN(Net, "dropped a connection claiming to come from rank %d", from);
    return;
  }
  std::lock_guard lock(incomingMutex_);
  auto [it, inserted] = incoming_.try_emplace({from, channel}, std::move(connection));
  if (!inserted) LOOM_WARN(Net, "dropped a second connection from rank %d", from);
}

std::unique_ptr<transport::RecvConnection> Engine::claim(int from, transport::Channel channel) {
  std::lock_guard lock(incomingMutex_);
  auto it = incoming_.find({from, channel});
  if (it == incoming_.end()) return nullptr;
  auto connection = std::move(it->second);
  incoming_.erase(it);
  return connection;
}

std::unique_ptr<transport::SendConnection> Engine::connect(int peer, transport::Channel channel) {
  const auto& endpoint = endpoints_[static_cast<size_t>(peer)];
  return transport::selectTransport(transports_, context_.self, endpoint).connect(endpoint, channel, context_);
}

bool Engine::quietWithSelf() {
  std::lock_guard lock(mutex_);
  const Peer& self = peers_[static_cast<size_t>(rank())];
  return !self.send && self.sends.queue.empty() && self.recvs.queue.empty();
}

const char* Engine::transportTo(int peer) const {
  if (peer == rank()) return "self";
  const auto& transport = transport::selectTransport(transports_, context_.self, endpoints_[static_cast<size_t>(peer)]);
  return transport.name();
}

void Engine::post(std::span<P2pOp* const> ops) {
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  for (P2pOp* op : ops) {
    Peer& peer = peers_[static_cast<size_t>(op->peer)];
    Direction& direction = op->kind == OpKind::Send ? peer.sends : peer.recvs;
    if (!direction.broken.empty()) {
      op->error = loomRemoteError;
      op->message = op->describe() + ": the connection is unusable after an earlier failure (" + direction.broken + ")";
      finish(*op, OpState::Failed);
      continue;
    }
    op->lastActivity = now;
    direction.queue.push_back(op);
    if (!isActive_[static_cast<size_t>(op->peer)]) {
      isActive_[static_cast<size_t>(op->peer)] = 1;
      active_.push_back(op->peer);
    }
  }
}

void Engine::withdraw(std::span<P2pOp* const> ops) {
  std::lock_guard lock(mutex_);
  for (P2pOp* op : ops) {
    if (op->state.load(std::memory_order_acquire) != OpState::Pending) continue;
    Peer& peer = peers_[static_cast<size_t>(op->peer)];
    Direction& direction = op->kind == OpKind::Send ? peer.sends : peer.recvs;
    const bool wasHead = !direction.queue.empty() && direction.queue.front() == op;
    if (op->kind == OpKind::Send && op->byHandle && peer.send) withdrawHandle(*op, *peer.send);
    std::erase(direction.queue, op);
    direction.removed(op);
    if (wasHead && !direction.queue.empty()) direction.queue.front()->lastActivity = Clock::now();
    if (op->started && direction.broken.empty()) direction.broken = op->describe() + " was abandoned midway";
    op->error = loomInvalidUsage;
    op->message = op->describe() + ": abandoned";
    finish(*op, OpState::Failed);
  }
}

void Engine::complete(Direction& direction) {
  P2pOp* op = direction.queue.front();
  direction.queue.pop_front();
  direction.removed(op);
  finish(*op, OpState::Done);
  if (!direction.queue.empty()) direction.queue.front()->lastActivity = Clock::now();
}

void Engine::fail(Direction& direction, const Error& error) {
  P2pOp* head = direction.queue.front();
  direction.queue.pop_front();
  direction.removed(head);
  const bool connectionLost = head->started || error.code() == loomRemoteError || error.code() == loomSystemError ||
                              error.code() == loomInvalidUsage;
  std::string why = head->describe() + ": " + error.what();
  head->error = error.code();
  head->message = why;
  finish(*head, OpState::Failed);
  LOOM_WARN(Net, "%s", why.c_str());
  if (!connectionLost) {
    if (!direction.queue.empty()) direction.queue.front()->lastActivity = Clock::now();
    return;
  }
  direction.broken = why;
  for (P2pOp* op : direction.queue) {
    op->error = error.code();
    op->message = op->describe() + ": the connection is unusable after an earlier failure (" + why + ")";
    finish(*op, OpState::Failed);
  }
  direction.queue.clear();
}

bool Engine::progress() {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  bool moved = false;
  for (int rank : active_) {
    Peer& peer = peers_[static_cast<size_t>(rank)];
    moved |= progressSends(rank, peer);
    moved |= progressRecvs(rank, peer);
  }
  std::erase_if(active_, [this](int rank) {
    const Peer& peer = peers_[static_cast<size_t>(rank)];
    bool idle = peer.sends.queue.empty() && peer.recvs.queue.empty();
    if (idle) isActive_[static_cast<size_t>(rank)] = 0;
    return idle;
  });
  return moved;
}

template <class Advance>
bool Engine::drive(Direction& direction, const char* silence, Advance advance) {
  bool moved = false;
  while (!direction.queue.empty()) {
    P2pOp& op = *direction.queue.front();
    try {
      const Step step = advance(op);
      if (step.finished) {
        complete(direction);
        moved = true;
        continue;
      }
      if (step.moved) {
        op.lastActivity = Clock::now();
        moved = true;
      } else if (Clock::now() - op.lastActivity > context_.timeout) {
        throw Error(loomTimeout, std::string(silence) + " for " + std::to_string(context_.timeout.count()) +
                                     " ms (LOOM_TIMEOUT_MS)");
      }
      break;
    } catch (const Error& e) {
      fail(direction, e);
      moved = true;
    }
  }
  return moved;
}

bool Engine::progressSends(int rank, Peer& peer) {
  return drive(peer.sends, "the peer took nothing", [&](P2pOp& op) {
    if (!peer.send) {
      peer.send = connect(rank, transport::Channel::PointToPoint);
      transport::requireHostSlots(peer.send->slotKind(), peer.send->peerName());  // this thread copies into them
    }
    transport::SendConnection& connection = *peer.send;
    Step step{.moved = connection.progress(), .finished = false};
    if (op.handle && sendByHandle(op, connection, step)) return step;
    while (op.moved < op.bytes || !op.started) {
      auto slot = connection.reserve();
      if (slot.empty()) break;
      const size_t n = std::min(slot.size(), op.bytes - op.moved);
      const transport::SlotTag tag{.messageBytes = op.bytes,
                                   .offset = op.moved,
                                   .bytes = static_cast<uint32_t>(n),
                                   .message = op.messageId,
                                   .index = static_cast<uint32_t>(op.moved / slot.size()),
                                   .call = op.call};
      if (op.handle) {  // device memory that the receiver would not map: the device copies it into the slot
        cuda::copyAny(slot.data(), op.buffer + op.moved, n);
        connection.commit(tag);
      } else {
        // A socket sends from the user's buffer: the op finishes only once flushed().
        connection.commitFrom({op.buffer + op.moved, n}, tag);
      }
      op.moved += n;
      op.started = true;
      step.moved = true;
    }
    if (op.started && op.moved == op.bytes) {
      step.moved |= connection.progress();  // push the last slots towards the peer
      step.finished = connection.flushed();
    }
    return step;
  });
}

bool Engine::progressRecvs(int rank, Peer& peer) {
  return drive(peer.recvs, "nothing arrived", [&](P2pOp& op) {
    Step step{.moved = false, .finished = false};
    if (!peer.recv) {
      peer.recv = claim(rank, transport::Channel::PointToPoint);
      if (!peer.recv) return step;  // the sender has not connected yet
      transport::requireHostSlots(peer.recv->slotKind(), peer.recv->peerName());  // this thread copies out of them
    }
    transport::RecvConnection& connection = *peer.recv;
    if (peer.recvs.landingFor != &op && !op.started) {  // its first slot has not been taken yet
      peer.recvs.landing.emplace(connection, std::span(op.buffer, op.bytes), op.messageId);
      peer.recvs.landingFor = &op;
    }
    while (op.moved < op.bytes || !op.started) {
      auto slot = connection.peek();
      if (!slot) {
        if (connection.progress()) continue;
        break;
      }
      if ((slot->tag.flags & transport::kSlotHoldsHandle) != 0) {
        takeByHandle(op, *slot, rank, peer);
        step.moved = true;
        continue;
      }
      requireMatch(slot->tag, {op.bytes, op.messageId, op.call, op.describeMessage}, op.moved, rank, {});
      if (op.moved + slot->data.size() > op.bytes) {
        throw Error(loomRemoteError, "rank " + std::to_string(rank) + " sent more bytes than its message holds");
      }
      std::byte* into = op.buffer + op.moved;
      if (slot->data.data() != into) copyBytes(into, slot->data.data(), slot->data.size());  // else it landed there
      connection.release();
      op.moved += slot->data.size();
      op.started = true;
      step.moved = true;
    }
    step.finished = op.started && op.moved == op.bytes;
    return step;
  });
}

void Engine::addWaitFds(std::vector<transport::WaitFd>& out) {
  std::lock_guard lock(mutex_);
  for (int rank : active_) {
    const Peer& peer = peers_[static_cast<size_t>(rank)];
    if (!peer.sends.queue.empty() && peer.send) peer.send->addWaitFds(out);
    if (!peer.recvs.queue.empty() && peer.recv) peer.recv->addWaitFds(out);
  }
}

void Engine::failOnStrays() {
  const P2pOp* current = nullptr;  // an op of the collective this rank is in, if any
  for (int rank : active_) {
    for (const auto* queue : {&peers_[static_cast<size_t>(rank)].recvs.queue,
                              &peers_[static_cast<size_t>(rank)].sends.queue}) {
      for (const P2pOp* op : *queue) {
        if (op->call != 0 && current == nullptr) current = op;
      }
    }
  }
  if (current == nullptr) return;
  for (int rank = 0; rank < nranks(); ++rank) {
    Peer& peer = peers_[static_cast<size_t>(rank)];
    if (rank == this->rank() || !peer.recvs.queue.empty()) continue;  // a posted receive checks its own slots
    std::optional<transport::RecvSlot> slot;
    try {
      if (!peer.recv) peer.recv = claim(rank, transport::Channel::PointToPoint);
      if (!peer.recv) continue;
      peer.recv->progress();
      slot = peer.recv->peek();
    } catch (const Error&) {
      continue;  // a lost connection that no op waits on is no concern here
    }
    if (!slot || slot->tag.call == 0) continue;  // point-to-point messages wait for their receives
    const bool behind = static_cast<int32_t>(slot->tag.message - current->messageId) < 0;
    const bool otherCall = slot->tag.message == current->messageId && slot->tag.call != current->call;
    if (!behind && !otherCall) continue;
    const transport::SlotTag ours{.messageBytes = slot->tag.messageBytes, .message = current->messageId,
                                  .call = current->call};
    const Error stray(loomInvalidUsage,
                      "rank " + std::to_string(rank) + " sent " + current->describeMessage(slot->tag) +
                          " while this rank is in " + current->describeMessage(ours) +
                          " (every rank must make the same calls in the same order, with matching counts, types, "
                          "ops, roots and peers)");
    for (int r : active_) {
      Peer& p = peers_[static_cast<size_t>(r)];
      if (!p.sends.queue.empty()) fail(p.sends, stray);
      if (!p.recvs.queue.empty()) fail(p.recvs, stray);
    }
    return;
  }
}

void Engine::checkPeers() {
  std::lock_guard lock(mutex_);
  failOnStrays();
  for (int rank : active_) {
    Peer& peer = peers_[static_cast<size_t>(rank)];
    try {
      if (!peer.sends.queue.empty() && peer.send) peer.send->checkAlive();
    } catch (const Error& e) {
      fail(peer.sends, e);
    }
    try {
      if (!peer.recvs.queue.empty() && peer.recv) peer.recv->checkAlive();
    } catch (const Error& e) {
      fail(peer.recvs, e);
    }
  }
}

}  // namespace loom
