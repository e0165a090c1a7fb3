// What a rank is calling, packed into the 32 bits that every slot's tag
// carries (SlotTag::call), so that a receiver can tell a peer that is in
// another call and say which: the collective (4 bits), the datatype (4), the
// reduction as the user named it (4) and the root (20, modulo 2^20). 0 is
// point-to-point. Together with the message size and the collective's
// sequence number, this is what ranks must agree on (message_match.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "collectives/collective.hpp"
#include "transport/connection.hpp"

namespace loom::coll {

// Of the call as the user made it: before PreMulSum and Avg are resolved.
uint32_t callSignature(const Collective& c);

// "allreduce #3 (float32 sum)", "broadcast #2 (int8, root 1)"; "a
// point-to-point call" for 0.
std::string describeCall(uint32_t call, uint32_t sequence);

// "a 668-byte piece of allreduce #3 (float32 sum)"; point-to-point messages
// as describeP2pMessage says them. A DescribeMessage (message_match.hpp).
std::string describeCollectiveMessage(const transport::SlotTag& tag);

}  // namespace loom::coll
