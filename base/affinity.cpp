#include "base/affinity.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include "base/log.hpp"

namespace loom {

std::vector<int> threadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

bool bindThisThread(std::span<const int> cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  }
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    LOOM_WARN(Init, "could not bind a thread to %zu CPUs: %s", cpus.size(), std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace loom
