// Where a process learns its rank, the world size and the rendezvous store
// when it was started by a launcher. Read in this order, first match wins:
//   1. Loom / loomrun:  LOOM_RANK, LOOM_WORLD_SIZE, LOOM_LOCAL_RANK
//   2. torchrun:        RANK, WORLD_SIZE, LOCAL_RANK
//   3. Slurm (srun):    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
//   4. Open MPI:        OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   5. PMI (MPICH, Hydra): PMI_RANK, PMI_SIZE
// The store: LOOM_STORE_ADDR if set, else MASTER_ADDR and MASTER_PORT + 1
// (torchrun's own agent already listens on MASTER_PORT); its secret
// LOOM_STORE_SECRET, whatever the launcher.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/secret.hpp"

namespace loom {

struct LaunchEnv {
  std::string launcher;  // "loom", "torchrun", "slurm", "openmpi", "pmi"
  int rank = -1;
  int size = 0;
  int localRank = -1;    // -1 when the launcher does not say
  std::string store;     // an openStore() spec
  std::optional<Secret> storeSecret;  // LOOM_STORE_SECRET: the TCP store serves only clients that present it
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Throws loomInvalidArgument naming the variables when no launcher's set is
// complete, a value is not a number, the rank is out of range, or no store
// address is given.
LaunchEnv readLaunchEnv(const EnvLookup& lookup);
LaunchEnv readLaunchEnv();  // from the process environment

}  // namespace loom
