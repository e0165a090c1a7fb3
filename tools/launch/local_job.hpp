// Runs N ranks of a program as processes on this machine: the rank
// environment set (LOOM_RANK, LOOM_WORLD_SIZE, LOOM_LOCAL_RANK, a fresh
// file store in LOOM_STORE_ADDR and a fresh LOOM_STORE_SECRET unless one is set), each output line prefixed with its rank,
// and the whole job ended as soon as one rank fails. loomrun and loom-perf's
// embedded launcher are both this.
#pragma once

#include <string>
#include <vector>

namespace loom::launch {

struct JobOptions {
  int nranks = 1;
  std::vector<std::string> argv;  // program and arguments
  bool prefixOutput = true;
};

struct JobResult {
  int exitCode = 0;     // the first failure's status (128 + signal when killed), else 0
  int failedRank = -1;
  std::string failure;  // e.g. "rank 2 (pid 123) was killed by signal 9 (Killed)"
};

JobResult runLocalJob(const JobOptions& options);

// True when a launcher (loomrun, torchrun, Slurm, Open MPI, PMI) started this process as a rank.
bool launchedAsRank();
// A tool started by hand runs itself as `nranks` local ranks: returns the job's exit status.
int relaunchAsLocalJob(int nranks, int argc, char** argv);

}  // namespace loom::launch
