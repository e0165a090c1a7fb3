// Which node a rank is on: ranks with equal host ids share a kernel and can
// reach each other through shared memory.
#pragma once

#include <cstdint>

namespace loom {

// LOOM_HOSTID if set (hashed), else a hash of the host name and the kernel
// boot id (so that cloned VMs with the same host name still differ).
uint64_t hostId();

}  // namespace loom
