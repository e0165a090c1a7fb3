// Ranks of one job in one process, all driven by its single thread (NCCL's
// one-thread-many-devices idiom), beside other processes of the same job:
//   loom_test_group ID_HEX NRANKS FIRST_RANK RANKS_HERE null|rank|shared
// The ranks start with non-blocking inits; then every collective and a
// send/receive ring run as one group per round. Prints "ok" and exits 0
// when every rank's every result was exact; else says what went wrong.
#include <loom/loom.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/group_round.hpp"

namespace {

bool decodeId(const std::string& hex, loomUniqueId& id) {
  if (hex.size() != 2 * sizeof id.internal) return false;
  for (size_t i = 0; i < sizeof id.internal; ++i) {
    id.internal[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using loom::check::Coll;
  using loom::test::GroupStreams;
  if (argc != 6) return 2;
  loomUniqueId id;
  if (!decodeId(argv[1], id)) return 2;
  const int nranks = std::atoi(argv[2]);
  const int first = std::atoi(argv[3]);
  const int here = std::atoi(argv[4]);
  const std::string mode = argv[5];
  const GroupStreams streams = mode == "rank" ? GroupStreams::PerRank
                               : mode == "shared" ? GroupStreams::Shared
                                                  : GroupStreams::Null;

  std::vector<loomComm_t> comms(static_cast<size_t>(here));
  for (int i = 0; i < here; ++i) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.blocking = 0;
    const loomResult_t r = loomCommInitRankConfig(&comms[static_cast<size_t>(i)], nranks, id, first + i, &config);
    if (r != loomSuccess && r != loomInProgress) {
      std::printf("init of rank %d failed: %s\n", first + i, loomGetLastError(nullptr));
      return 1;
    }
  }
  for (auto comm : comms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    loomResult_t state = loomInProgress;
    while (state == loomInProgress && std::chrono::steady_clock::now() < deadline) {
      loomCommGetAsyncError(comm, &state);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (state != loomSuccess) {
      std::printf("init failed: %s\n", loomGetLastError(comm));
      return 1;
    }
  }

  int failures = 0;
  for (Coll coll : {Coll::Broadcast, Coll::Reduce, Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather,
                    Coll::AlltoAll, Coll::Gather, Coll::Scatter, Coll::SendRecv}) {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{70001}}) {
      const int root = static_cast<int>(count % static_cast<size_t>(nranks));
      const std::string wrong = loom::test::runGroupRound(comms, first, nranks, coll, count, root, streams);
      if (!wrong.empty()) {
        std::printf("%s of %zu: %s\n", loom::check::collName(coll), count, wrong.c_str());
        ++failures;
      }
    }
  }
  for (auto comm : comms) loomCommDestroy(comm);
  if (failures == 0) std::printf("ok\n");
  return failures == 0 ? 0 : 1;
}
