// LOOM_CHECK=1: before each collective, every rank's signature (sequence
// number, collective, count, datatype, reduction, root) goes around the
// bootstrap ring, out of band of the data path. Ranks that disagree fail the
// call on every rank with one message naming each group of ranks and its
// signature, instead of corrupting data or waiting for each other forever.
#pragma once

#include <cstdint>

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

bool signatureCheckEnabled();

// Throws loomInvalidUsage on every rank when any two ranks' signatures differ.
void checkSignatures(Communicator& comm, const Collective& c, uint32_t sequence);

}  // namespace loom::coll
