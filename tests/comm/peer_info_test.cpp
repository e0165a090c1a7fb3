// loomCommGetPeerInfo: what tools learn of each peer, and its errors.
#include <loom/loom.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/ranks.hpp"

namespace {

using loom::test::destroyAll;
using loom::test::onThreads;

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return std::string(name).substr(0, sizeof(loomPeerInfo_t{}.host) - 1);
}

void expectPeers(int n, const char* transport) {
  auto comms = loom::test::initThreadComms(n);
  onThreads(n, [&](int r) {
    loomComm_t c = comms[static_cast<size_t>(r)];
    for (int peer = 0; peer < n; ++peer) {
      loomPeerInfo_t info;
      std::memset(&info, 0x5a, sizeof info);  // every field must be written
      ASSERT_EQ(loomCommGetPeerInfo(c, peer, &info), loomSuccess) << loomGetLastError(c);
      EXPECT_EQ(info.rank, peer);
      EXPECT_EQ(info.pid, ::getpid());
      EXPECT_EQ(std::string(info.host), hostname());
      EXPECT_EQ(info.sameHost, 1);
      EXPECT_EQ(info.localRank, peer);  // one host: local rank is rank
      EXPECT_EQ(info.localCount, n);
      EXPECT_GE(info.numaNode, -1);
      EXPECT_EQ(info.gpu, -1);  // no GPU on a host-memory communicator here
      EXPECT_LT(std::strlen(info.nic), sizeof info.nic);
      EXPECT_STREQ(info.transport, peer == r ? "self" : transport) << "rank " << r << " to " << peer;
    }
  });
  destroyAll(comms);
}

TEST(PeerInfo, OneHostReachesEveryPeerOverSharedMemory) { expectPeers(3, "shm"); }

TEST(PeerInfo, ForcedSocketsAreWhatItReports) {
  loom::test::ScopedEnv socket("LOOM_TRANSPORT", "socket");
  expectPeers(2, "socket");
}

TEST(PeerInfo, BadArgumentsAreNamed) {
  auto comms = loom::test::initThreadComms(2);
  loomComm_t c = comms[0];
  loomPeerInfo_t info;
  for (int peer : {-1, 2, INT_MAX, INT_MIN}) {
    EXPECT_EQ(loomCommGetPeerInfo(c, peer, &info), loomInvalidArgument) << peer;
    EXPECT_NE(std::string(loomGetLastError(c)).find("peer=" + std::to_string(peer)), std::string::npos)
        << loomGetLastError(c);
  }
  EXPECT_EQ(loomCommGetPeerInfo(c, 1, nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(c)).find("info"), std::string::npos) << loomGetLastError(c);
  EXPECT_EQ(loomCommGetPeerInfo(nullptr, 0, &info), loomInvalidArgument);
  destroyAll(comms);
}

}  // namespace
