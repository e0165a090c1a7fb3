// A rank for the dark-link test (tests/netns/link.sh): real processes, a
// real link cut.
//   loom_test_link A B DIR collective|p2p
// Every rank runs all-to-alls of 64 Ki floats (collective), or a group of
// 64 Ki-float sends to and receives from every other rank (p2p), so that
// every pair of ranks, A and B too, carries data, until one fails; after
// its 20th it writes DIR/ready.RANK, the script's sign to cut the link
// between ranks A and B.
// Every rank must then fail with loomRemoteError whose message names both
// ends of the link; each prints what it got and how long after its last
// good all-to-all. Exit 0 only if that held.
#include <loom/loom.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  const bool p2p = std::string(argv[4]) == "p2p";
  const std::string a = "rank " + std::string(argv[1]), b = "rank " + std::string(argv[2]);
  loomComm_t comm = nullptr;
  if (loomCommInitFromEnv(&comm, nullptr) != loomSuccess) {
    std::printf("FAIL init: %s\n", loomGetLastError(nullptr));
    return 1;
  }
  int rank = -1, size = 0;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &size);
  constexpr size_t kPerPeer = 65536;
  std::vector<float> send(kPerPeer * static_cast<size_t>(size), 1.0f), recv(send.size());
  loomResult_t result = loomSuccess;
  auto lastGood = std::chrono::steady_clock::now();
  for (int i = 0; result == loomSuccess; ++i) {
    if (p2p) {
      loomGroupStart();
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        const size_t at = kPerPeer * static_cast<size_t>(peer);
        loomSend(send.data() + at, kPerPeer, loomFloat32, peer, comm, nullptr);
        loomRecv(recv.data() + at, kPerPeer, loomFloat32, peer, comm, nullptr);
      }
      result = loomGroupEnd();
    } else {
      result = loomAlltoAll(send.data(), recv.data(), kPerPeer, loomFloat32, comm, nullptr);
    }
    if (result != loomSuccess) break;
    lastGood = std::chrono::steady_clock::now();
    if (i == 20) std::ofstream(std::string(argv[3]) + "/ready." + std::to_string(rank)) << "ready\n";
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - lastGood);
  const std::string message = loomGetLastError(comm);
  std::printf("rank %d: %s after %lld ms: %s\n", rank, loomGetErrorString(result), static_cast<long long>(ms.count()),
              message.c_str());
  // Every rank reports before any leaves: a rank that aborts is a failure
  // its watcher would announce, and a slower rank might report that instead.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  loomCommAbort(comm);
  const bool named = message.find(a) != std::string::npos && message.find(b) != std::string::npos;
  return result == loomRemoteError && named ? 0 : 1;
}
