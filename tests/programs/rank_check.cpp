// A rank for the process tests: init from the launcher's environment, check
// rank and size against what the launcher said, barrier, report (with a
// line per peer from loomCommGetPeerInfo).
//   loom_test_rank EXPECTED_SIZE [sleep|exit:N on rank R as "R:exit:N" / "R:sleep"]
#include <loom/loom.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int expected = std::atoi(argv[1]);
  loomComm_t comm = nullptr;
  if (loomCommInitFromEnv(&comm, nullptr) != loomSuccess) {
    std::printf("init failed: %s\n", loomGetLastError(nullptr));
    return 1;
  }
  int rank = -1, size = -1, local = -1, localSize = -1;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &size);
  loomCommLocalRank(comm, &local);
  loomCommLocalCount(comm, &localSize);
  if (argc > 2) {  // an injected behaviour for one rank, e.g. "1:exit:3"
    std::string action = argv[2];
    if (std::atoi(action.c_str()) == rank) {
      if (action.find(":exit:") != std::string::npos) return std::atoi(action.c_str() + action.rfind(':') + 1);
      if (action.find(":sleep") != std::string::npos) ::sleep(600);
    }
  }
  if (size != expected) {
    std::printf("rank %d: size %d, expected %d\n", rank, size, expected);
    return 1;
  }
  for (int i = 0; i < 10; ++i) {
    if (loomCommBarrier(comm) != loomSuccess) {
      std::printf("rank %d: barrier failed: %s\n", rank, loomGetLastError(comm));
      return 1;
    }
  }
  for (int peer = 0; peer < size; ++peer) {
    loomPeerInfo_t info;
    if (loomCommGetPeerInfo(comm, peer, &info) != loomSuccess) {
      std::printf("rank %d: peer info of %d failed: %s\n", rank, peer, loomGetLastError(comm));
      return 1;
    }
    std::printf("rank %d sees peer %d: pid %d host %s same host %d local %d of %d transport %s\n", rank, info.rank,
                info.pid, info.host, info.sameHost, info.localRank, info.localCount, info.transport);
  }
  std::printf("rank %d of %d ok (local %d of %d)\n", rank, size, local, localSize);
  return loomCommDestroy(comm) == loomSuccess ? 0 : 1;
}
