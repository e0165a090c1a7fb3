// What the collectives keep per communicator: a lock that runs its
// collectives one at a time (they own the collective channel's connections
// while they run), their sequence number, the tuner, the created reduction
// ops, scratch memory, and the node's shared segment.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/futex_lock.hpp"
#include "collectives/call_name.hpp"
#include "collectives/channel.hpp"
#include "collectives/flight_recorder.hpp"
#include "collectives/redop.hpp"
#include "collectives/ring.hpp"
#include "collectives/scratch.hpp"
#include "collectives/shm/node_area.hpp"
#include "collectives/tuner.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

class CommState final : public CommExtension {
 public:
  explicit CommState(Communicator& comm);

  // The communicator's state, created on first use (inline: every call asks;
  // creating it is out of line).
  static CommState& of(Communicator& comm) {
    if (CommExtension* ready = comm.collectivesReady.load(std::memory_order_acquire)) {
      return static_cast<CommState&>(*ready);
    }
    return create(comm);
  }

  FutexLock runLock;  // taken by every call: one atomic instruction where no one waits
  uint32_t sequence = 0;  // collectives started, under runLock
  CallName callName;  // the running collective's, for errors ("allreduce #12"), under runLock
  const bool checkSignatures;  // LOOM_CHECK, read once per communicator
  const size_t stagingPieceBytes;  // LOOM_STAGING_PIECE_BYTES, read once per communicator
  const bool jobHasDevices;        // some rank sees a CUDA device (device_staging.hpp's pieces)
  Tuner tuner;
  RedOpTable ops;
  FlightRecorder recorder;  // under runLock
  const Ring ring;  // the topology ring the ring and chain algorithms walk
  // The ranks with this rank's local index on each host (hierarchical
  // algorithm); none unless every host has the same two or more ranks.
  const std::optional<Ring> acrossHosts;
  const std::array<topo::Tree, 2> trees;  // the tree algorithm's, over the ring's positions

  // Scratch memory, under runLock: PreMulSum's scaled input (on the device
  // for device inputs that an algorithm reads in place), and what the
  // point-to-point algorithms receive before folding it in.
  Scratch scaledInput;
  DeviceScratch scaledOnDevice;
  Scratch received;

  CollectiveChannel channel;  // under runLock

  // The node's shared segment, under runLock; mapped by the first
  // collective that runs on it (a collective call: every rank gets there).
  shm::NodeArea& nodeArea(size_t slotBytes);

 private:
  static CommState& create(Communicator& comm);

  Communicator& comm_;
  std::unique_ptr<shm::NodeArea> node_;
};

}  // namespace loom::coll
