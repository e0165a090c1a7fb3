// Messages by handle: a send of device memory to a rank of this node, larger
// than the connection's FIFO (so it waits for the receiver anyway), puts a
// memory::Handle of its buffer (a CUDA IPC handle and offset; the fake
// device's memfd; the address, between threads) in one slot instead of the
// bytes. The receiver maps it (memory::Mappings, which keeps CUDA IPC views
// as LOOM_CUDA_IPC_CACHE says), copies the whole message with the device's
// copy engine straight into its destination, and releases the slot; the
// send finishes once that slot is released, so its buffer outlives the
// copy. One copy where the staged path makes four (device to pinned, into
// the slot, out of it, pinned to device), as NCCL's P2P transport reads or
// writes a peer's buffer through CUDA IPC.
//
// A sender that gives up on the message (an abort, a failure) withdraws the
// handle unless the receiver has taken it, one compare-and-swap deciding
// (SendConnection::withdrawHandle); once taken, it waits for the slot's
// release before its caller may free the buffer, and a receiver that finds
// the handle withdrawn fails its receive instead of reading.
//
// A receiver that cannot map a handle (CUDA IPC refused across containers,
// say) says so in the connection (RecvConnection::refuseHandles) and
// releases the slot unread; the sender then sends that message's bytes,
// copied from its device slot by slot, and group.cpp stages the later ones
// to that peer as before. Every wait here is the engine's: a receiver that
// never releases the slot is the sender's "the peer took nothing" after
// LOOM_TIMEOUT_MS, one that dies is its lost peer.
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

#include "base/bytes.hpp"
#include "base/counters.hpp"
#include "base/device/cuda.hpp"
#include "base/log.hpp"
#include "comm/engine/engine.hpp"

namespace loom {

bool Engine::sendsByHandle(int peer, size_t bytes) {
  if (!singleCopy_ || bytes <= context_.fifo.totalBytes() || std::string_view(transportTo(peer)) != "shm") {
    return false;
  }
  std::lock_guard lock(mutex_);
  const Peer& p = peers_[static_cast<size_t>(peer)];
  return !p.send || p.send->takesHandles();  // not connected yet: it has refused nothing
}

bool Engine::sendByHandle(P2pOp& op, transport::SendConnection& connection, Step& step) {
  if (!op.byHandle) {
    if (op.started || !connection.takesHandles()) return false;  // refused since the call staged it
    auto slot = connection.reserve();
    if (slot.empty()) return true;  // no free slot yet
    ByteWriter w;
    op.handle->serialize(w);
    if (w.bytes().size() > slot.size()) return false;  // slots too small to hold one
    std::memcpy(slot.data(), w.bytes().data(), w.bytes().size());
    op.handleSlot = connection.slotsCommitted();
    connection.offerHandle(op.handleSlot);
    connection.commit({.messageBytes = op.bytes,
                       .offset = 0,
                       .bytes = static_cast<uint32_t>(w.bytes().size()),
                       .message = op.messageId,
                       .index = 0,
                       .call = op.call,
                       .flags = transport::kSlotHoldsHandle});
    op.byHandle = true;
    op.started = true;
    step.moved = true;
  }
  if (connection.slotsReleased() <= op.handleSlot) return true;  // the receiver is not done with it
  // Ops to a peer finish in order, so no later handle of this rank's can have
  // been refused yet: a refusal now is this one's, and its bytes follow.
  if (!connection.takesHandles()) {
    op.byHandle = false;
    step.moved = true;
    return false;
  }
  op.moved = op.bytes;
  step.finished = true;
  return true;
}

void Engine::withdrawHandle(const P2pOp& op, transport::SendConnection& connection) {
  if (connection.withdrawHandle(op.handleSlot)) return;  // the receiver will not read it
  const auto deadline = std::chrono::steady_clock::now() + context_.timeout;
  while (connection.slotsReleased() <= op.handleSlot && std::chrono::steady_clock::now() < deadline) {
    try {
      connection.checkAlive();
    } catch (const Error&) {
      return;  // a receiver that is gone reads nothing more
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void Engine::takeByHandle(P2pOp& op, const transport::RecvSlot& slot, int rank, Peer& peer) {
  transport::RecvConnection& connection = *peer.recv;
  try {
    requireMatch(slot.tag, {op.bytes, op.messageId, op.call, op.describeMessage}, op.moved, rank, {});
  } catch (const Error&) {
    connection.release();  // the sender, waiting for it, finishes as one whose bytes were sent
    throw;
  }
  if (!connection.takeHandle()) {
    connection.release();
    throw Error(loomRemoteError, "rank " + std::to_string(rank) +
                                     " withdrew its message before this rank took it (its call failed or was aborted)");
  }
  const std::byte* from = nullptr;
  if (!peer.refusedHandles) {
    ByteReader r(slot.data, "a message's handle from rank " + std::to_string(rank));
    const memory::Handle handle = memory::Handle::deserialize(r);
    try {
      from = mappings_.map(handle);
    } catch (const Error& e) {
      LOOM_WARN(Net, "rank %d's device buffers cannot be mapped here (%s): its messages come through the slots",
                rank, e.what());
      peer.refusedHandles = true;
    }
  }
  if (from == nullptr) {
    connection.refuseHandles();
    connection.release();  // unread: the sender sends the bytes
    return;
  }
  std::byte* to = op.deviceTarget != nullptr ? op.deviceTarget : op.buffer;
  cuda::copyAny(to, from, op.bytes);
  mappings_.closeDeviceMappings();
  connection.release();
  op.landedOnDevice = op.deviceTarget != nullptr;
  op.moved = op.bytes;
  op.started = true;
  counters::add(counters::Counter::BytesTakenByHandle, op.bytes);
}

}  // namespace loom
