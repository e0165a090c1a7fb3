// Whether another process on this host still runs, as the liveness checks of
// the shared segments and of the node's collectives ask it.
#pragma once

namespace loom {

// Whether process `pid` has ended: gone, or a zombie that its parent has not
// reaped yet (a rank killed a moment ago stays one until its launcher waits
// for it, and `kill(pid, 0)` still finds it). False while it runs, and where
// this process may not ask.
bool processHasExited(int pid);

}  // namespace loom
