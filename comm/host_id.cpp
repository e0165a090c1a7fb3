#include "comm/host_id.hpp"

#include <unistd.h>

#include <fstream>
#include <string>

#include "base/env.hpp"

namespace loom {
namespace {

uint64_t hashString(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

uint64_t hostId() {
  if (auto overridden = env::getIfSet("LOOM_HOSTID")) return hashString("LOOM_HOSTID=" + *overridden);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string bootId;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> bootId;
  return hashString(std::string(host) + "/" + bootId);
}

}  // namespace loom
