// What a loomUniqueId holds: the rendezvous root's address and the job's
// secret, sealed with a magic number and a checksum so that garbage or a
// truncated copy is refused with loomInvalidArgument instead of used.
#pragma once

#include <loom/loom.h>

#include "base/net/address.hpp"
#include "base/secret.hpp"

namespace loom {

struct UniqueIdData {
  net::SocketAddress root;
  Secret secret;
};

loomUniqueId encodeUniqueId(const UniqueIdData& data);
UniqueIdData decodeUniqueId(const loomUniqueId& id);

}  // namespace loom
