#include "comm/launch_env.hpp"

#include <cstdlib>

#include "base/env.hpp"
#include "base/error.hpp"

namespace loom {
namespace {

struct LauncherVars {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* localRank;  // may be null
};

constexpr LauncherVars kLaunchers[] = {
    {"loom", "LOOM_RANK", "LOOM_WORLD_SIZE", "LOOM_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"pmi", "PMI_RANK", "PMI_SIZE", nullptr},
};

int parseInt(const std::string& name, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < 0 || value > (1 << 24)) {
    throw Error(loomInvalidArgument, name + "='" + text + "' is not a valid number");
  }
  return static_cast<int>(value);
}

}  // namespace

LaunchEnv readLaunchEnv(const EnvLookup& lookup) {
  for (const auto& l : kLaunchers) {
    auto rank = lookup(l.rank);
    auto size = lookup(l.size);
    if (!rank || !size) continue;
    LaunchEnv e;
    e.launcher = l.launcher;
    e.rank = parseInt(l.rank, *rank);
    e.size = parseInt(l.size, *size);
    if (e.size < 1) throw Error(loomInvalidArgument, std::string(l.size) + " must be at least 1");
    if (e.rank >= e.size) {
      throw Error(loomInvalidArgument, std::string(l.rank) + "=" + *rank + " is out of range for " + l.size + "=" + *size);
    }
    if (l.localRank != nullptr) {
      if (auto local = lookup(l.localRank)) e.localRank = parseInt(l.localRank, *local);
    }
    if (auto store = lookup("LOOM_STORE_ADDR")) {
      e.store = *store;
    } else if (auto host = lookup("MASTER_ADDR"), port = lookup("MASTER_PORT"); host && port) {
      int p = parseInt("MASTER_PORT", *port);
      if (p < 1 || p > 65534) throw Error(loomInvalidArgument, "MASTER_PORT=" + *port + " is not a usable port");
      e.store = *host + ":" + std::to_string(p + 1);
    } else if (e.size > 1) {
      throw Error(loomInvalidArgument, std::string("found ") + l.launcher + "'s rank variables but no rendezvous store: "
                                       "set LOOM_STORE_ADDR (host:port or file:///shared/dir) or MASTER_ADDR and MASTER_PORT");
    }
    if (auto secret = lookup("LOOM_STORE_SECRET")) e.storeSecret = Secret::fromHex(*secret, "LOOM_STORE_SECRET");
    return e;
  }
  throw Error(loomInvalidArgument,
              "no launcher environment found: set LOOM_RANK/LOOM_WORLD_SIZE (or start under loomrun, torchrun, srun, "
              "mpirun or a PMI launcher)");
}

LaunchEnv readLaunchEnv() {
  return readLaunchEnv([](const std::string& name) -> std::optional<std::string> {
    // LOOM_* names go through the documented table; the launchers' own names do not belong there.
    if (name.starts_with("LOOM_")) return env::getIfSet(name);
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  });
}

}  // namespace loom
