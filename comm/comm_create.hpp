// The ways a communicator comes to be: from a unique id, from a launcher's
// environment, as several in-process ranks, or by splitting a parent.
#pragma once

#include <loom/loom.h>

#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.hpp"

namespace loom {

// Starts a rendezvous root in this process and returns its id.
loomUniqueId createUniqueId(std::chrono::milliseconds timeout);
// loomGetUniqueId's: createUniqueId's, or with LOOM_COMM_ID, nothing
// started and the id of the root there, the same in every process, which
// the rank 0 of a communicator made from it starts at its init (createComm).
loomUniqueId userUniqueId(std::chrono::milliseconds timeout);

// Validates the arguments (naming the bad one) and initializes; with a
// non-blocking config the communicator returns while init runs.
std::unique_ptr<loomComm> createComm(int nranks, const loomUniqueId& id, int rank, const Config& config);
// The same for a caller that may be inside a group (loomCommInitRank's):
// there the init is deferred to the group's end (group::defer), as NCCL
// defers a group's inits, and the communicator is returned before it.
std::unique_ptr<loomComm> createCommInGroup(int nranks, const loomUniqueId& id, int rank, const Config& config);

std::unique_ptr<loomComm> createCommFromEnv(const Config& config);

// ndev ranks as threads of this process, rank i created on CUDA device
// devlist[i] (devlist empty: i mod the devices) where a device is visible;
// loomInvalidArgument naming devlist's entry that is no visible device.
std::vector<std::unique_ptr<loomComm>> createLocalComms(int ndev, std::span<const int> devlist, const Config& config);

// Ranks with equal color form a new communicator, ordered by (key, parent
// rank). Returns null for color LOOM_SPLIT_NOCOLOR. Collective over parent.
std::unique_ptr<loomComm> splitComm(Communicator& parent, int color, int key, const Config& config);

// The parent's ranks less `exclude`, renumbered in order. Does not use the
// parent's bootstrap ring (excluded ranks may be dead): the survivors' new
// rank 0 starts a rendezvous and hands its id to each survivor through
// their watchdogs' listeners.
std::unique_ptr<loomComm> shrinkComm(Communicator& parent, std::span<const int> exclude, const Config& config);

}  // namespace loom
