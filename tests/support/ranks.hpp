// Runs one function per rank, each on its own thread, and collects failures.
#pragma once

#include <loom/loom.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom::test {

// Calls fn(rank) on n threads and joins them.
void onThreads(int n, const std::function<void(int rank)>& fn);

// n ranks as threads of this process, initialized from one unique id.
std::vector<loomComm_t> initThreadComms(int n);
void destroyAll(std::vector<loomComm_t>& comms);

// loomCommAbort(comm) from this thread once another thread's call on `comm`
// is under way and has had time to settle into its wait. Aborting earlier
// would free the communicator before that call even starts using it.
loomResult_t abortOnceInside(loomComm_t comm);

// Sets an environment variable for the scope of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace loom::test
