// How the shared-memory algorithms walk a buffer through the node's steps:
// pieces of at most one step's bytes (whole elements), and at least one step
// even for zero bytes, because a collective's first step is where the ranks
// check that they all called the same thing (shm::NodeArea::startCall).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <optional>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/device_staging.hpp"
#include "collectives/device_work.hpp"
#include "collectives/local_work.hpp"
#include "collectives/shm/node_area.hpp"

namespace loom::coll {

struct Piece {
  size_t offset;
  size_t bytes;
};

// Pieces of `total` bytes at `stepBytes` each: piece(i) for i < count().
class Pieces {
 public:
  Pieces(size_t total, size_t stepBytes) : total_(total), step_(stepBytes) {}
  size_t count() const { return total_ <= step_ ? 1 : (total_ + step_ - 1) / step_; }
  Piece operator[](size_t i) const {
    const size_t offset = std::min(total_, i * step_);
    return {offset, std::min(step_, total_ - offset)};
  }

 private:
  size_t total_;
  size_t step_;
};

// Whether a reducing step has every rank (or the root) reduce all the slots
// whole instead of a 1/n slice each: with two ranks that moves less memory (no
// result slot to write and read back), and small pieces are latency-bound, so
// one synchronization beats reading less. Same answer on every rank.
inline bool reducesWhole(int nranks, size_t pieceBytes) {
  constexpr size_t kLatencyBound = 16 << 10;
  return nranks == 2 || pieceBytes <= kLatencyBound;
}

// Element sizes are powers of two (1, 2, 4 or 8 bytes), so whole elements
// are a mask and a count is a shift: a 64-bit division takes tens of cycles,
// a noticeable share of a small collective.
//
// The most whole elements that fit in `room` bytes, in bytes.
inline size_t wholeElements(size_t room, size_t typeSize) { return room & ~(typeSize - 1); }
// The elements in `bytes` (whole elements).
inline size_t elementsIn(size_t bytes, size_t typeSize) {
  return bytes >> static_cast<unsigned>(std::countr_zero(typeSize));
}

// Runs `run` on `plan` as the CPU reaches it: device buffers swapped for
// pinned host copies (runStaged), if it has any. For the algorithms that run
// unstaged (run.cpp's readsDevice) on the paths that cannot read device memory.
// A template, not a std::function: a small call's host path then builds and
// calls no function object.
template <class Run>
void onHostBuffers(const Plan& plan, const Run& run) {
  if (!touchesDevice(plan.c)) {
    run(plan);
    return;
  }
  runStaged(plan.comm, plan.c, [&](const Collective& staged) {
    Plan onHost = plan;
    onHost.c = staged;
    run(onHost);
  });
}

// The first step of a call that offers its buffers (NodeArea::offerBuffers),
// for a rank whose buffers are on its device: it waits for its device to have
// written its input (peers may read it once it arrives), offers, and arrives
// staging nothing, having no host copy to stage. If every rank's buffers are
// then read in place (and every rank could map its peers': one more step),
// `read(peers, work)` does it with the device's LocalWork (inside a
// shm::DeviceReads) and this returns true; else every rank starts its
// staging over (NodeArea::deviceOffered), this one through onHostBuffers.
template <class Read>
bool readDeviceInPlace(const Plan& plan, shm::NodeArea& node, const void* send, size_t sendBytes, const void* recv,
                       size_t recvBytes, const Read& read) {
  std::optional<shm::DeviceReads> reads;  // goes last: the device's work drains before the mappings close
  DeviceWork device(plan.comm);
  device.waitForInputs();
  node.offerBuffers(send, sendBytes, recv, recvBytes);
  node.arrive(node.nextStep(), plan.what);
  if (!node.agreeOnDeviceMappings(plan.what)) return false;
  const shm::PeerBuffers* peers = node.peerBuffers();
  reads.emplace(node);
  LocalWork& work = device;
  read(*peers, work);
  return true;
}

// Pieces of a block for steps that move a piece of each of the node's n
// blocks in one slot (all-to-all, scatter): a slot's 1/n, at least one element.
inline Pieces piecesPerBlock(const Plan& plan, const shm::NodeArea& node) {
  const size_t perBlock = node.slotBytes() / static_cast<size_t>(node.localSize());
  return {plan.c.blockBytes(), std::max(plan.c.typeSize, wholeElements(perBlock, plan.c.typeSize))};
}

// What the first step of a rooted shm collective does with the buffers that
// peers could read in place: stage them through the segment only, or also
// offer them (NodeArea::offerBuffers; every rank alike).
enum class FirstStep { Stage, Offer };

// A call of more than one piece offers (its readers may then read in place,
// past one slot); a call of one piece stages, which is one step anyway.
inline FirstStep firstStepFor(const Pieces& pieces) {
  return pieces.count() > 1 ? FirstStep::Offer : FirstStep::Stage;
}

// Announces plan's collective on the node and returns the node's area.
inline shm::NodeArea& startOnNode(const Plan& plan) {
  plan.node->startCall({.sequence = plan.sequence, .bytes = plan.c.blockBytes(), .call = plan.call, .root = plan.c.root},
                       plan.callBytes);
  return *plan.node;
}

}  // namespace loom::coll
