// Whether a slot belongs to the message its receiver expects. Every slot's
// tag names its message (size, id, the sender's call signature) and where it
// sits in it; ranks that called different things, or the same thing with
// different counts, types, ops or roots, find out from the first slot that
// crosses between them, on every transport and algorithm, and fail with
// loomInvalidUsage naming the peer and both calls.
#pragma once

#include <cstdint>
#include <string>

#include "transport/connection.hpp"

namespace loom {

// What a tag's message is, in words, for errors: "a 668-byte piece of
// allreduce #3 (float32 sum)". The collectives layer passes its own for the
// messages of a collective.
using DescribeMessage = std::string (*)(const transport::SlotTag& tag);

// Point-to-point messages, and any message whose call this layer cannot name.
std::string describeP2pMessage(const transport::SlotTag& tag);

struct ExpectedMessage {
  uint64_t bytes = 0;
  uint32_t message = 0;  // the message id: a collective's sequence number, 0 for point-to-point
  uint32_t call = 0;     // the call signature, 0 for point-to-point
  DescribeMessage describe = describeP2pMessage;

  // The tag this rank would have sent for the slot at `offset`.
  transport::SlotTag tagAt(uint64_t offset) const {
    return {.messageBytes = bytes, .offset = offset, .message = message, .call = call};
  }
};

// Throws loomInvalidUsage, prefixed with `what` when given, unless `tag` is
// the slot at `offset` of `expected`; `peer` sent it.
void requireMatch(const transport::SlotTag& tag, const ExpectedMessage& expected, uint64_t offset, int peer,
                  const std::string& what);

}  // namespace loom
