// Which processing units (OS indexes, as hwloc and /proc number them) a
// thread runs on. Loom binds its own threads near the rank they serve, so
// that the memory they first touch lands on the rank's NUMA node.
#pragma once

#include <span>
#include <vector>

namespace loom {

// The calling thread's affinity, ascending.
std::vector<int> threadCpus();
// Binds the calling thread to `cpus`; false (logged) when the OS refuses.
// Empty `cpus` changes nothing.
bool bindThisThread(std::span<const int> cpus);

}  // namespace loom
