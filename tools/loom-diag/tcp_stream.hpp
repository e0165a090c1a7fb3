// The socket paths' limit, as memcpy is shared memory's: one raw TCP stream
// (TCP_NODELAY, 4 MiB socket buffers, no Loom in between) from one node to
// another, on the interface Loom itself would use (LOOM_SOCKET_IFNAME).
#pragma once

#include <loom/loom.h>

#include <cstddef>

namespace loom::diag {

// Called by ranks `from` and `to` only (on different hosts): `to` listens
// and sends its address to `from` with loomSend, `from` connects and sends
// `iters` messages of `bytes` after one untimed. Returns GB/s at `to` (the
// time from the first timed byte to the last), 0 at `from`. Throws Failure
// naming what failed.
double rawTcpGBps(loomComm_t comm, int rank, int from, int to, size_t bytes, int iters);

}  // namespace loom::diag
