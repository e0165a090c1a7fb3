// Bootstrap with ranks as threads: 1, 2, 3, 4, 8 and 16 ranks.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <unistd.h>

#include <cstring>

#include "comm/communicator.hpp"
#include "tests/support/ranks.hpp"

using loom::test::destroyAll;
using loom::test::onThreads;

class BootstrapThreads : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapThreads, InitQueriesAllgatherBarrier) {
  const int n = GetParam();
  auto comms = loom::test::initThreadComms(n);
  onThreads(n, [&](int r) {
    loomComm_t c = comms[static_cast<size_t>(r)];
    ASSERT_NE(c, nullptr);
    int rank = -1, count = -1, local = -1, localCount = -1;
    EXPECT_EQ(loomCommUserRank(c, &rank), loomSuccess);
    EXPECT_EQ(loomCommCount(c, &count), loomSuccess);
    EXPECT_EQ(loomCommLocalRank(c, &local), loomSuccess);
    EXPECT_EQ(loomCommLocalCount(c, &localCount), loomSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, n);
    EXPECT_EQ(local, r);  // one host: local rank is rank
    EXPECT_EQ(localCount, n);
    // Allgather: each rank's block is a function of (rank, index); check all of them.
    const size_t block = 1000;
    std::vector<uint32_t> data(block * static_cast<size_t>(n), 0);
    for (size_t i = 0; i < block; ++i) data[static_cast<size_t>(r) * block + i] = static_cast<uint32_t>(r * 7919 + i);
    c->bootstrap().allgather(std::as_writable_bytes(std::span(data)), block * sizeof(uint32_t));
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < block; ++i) {
        ASSERT_EQ(data[static_cast<size_t>(p) * block + i], static_cast<uint32_t>(p * 7919 + i)) << "peer " << p;
      }
    }
    for (int i = 0; i < 20; ++i) EXPECT_EQ(loomCommBarrier(c), loomSuccess) << loomGetLastError(c);
    EXPECT_EQ(loomCommFinalize(c), loomSuccess);
  });
  destroyAll(comms);
}

TEST_P(BootstrapThreads, InitAll) {
  const int n = GetParam();
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  ASSERT_EQ(loomCommInitAll(comms.data(), n, nullptr), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    int rank = -1;
    EXPECT_EQ(loomCommUserRank(comms[static_cast<size_t>(r)], &rank), loomSuccess);
    EXPECT_EQ(rank, r);
  }
  onThreads(n, [&](int r) { EXPECT_EQ(loomCommBarrier(comms[static_cast<size_t>(r)]), loomSuccess); });
  destroyAll(comms);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapThreads, ::testing::Values(1, 2, 3, 4, 8, 16));

TEST(Bootstrap, PeersSeeEachOthersInfo) {
  auto comms = loom::test::initThreadComms(3);
  const auto& peers = comms[1]->peers();
  ASSERT_EQ(peers.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(peers[static_cast<size_t>(r)].rank, r);
    EXPECT_EQ(peers[static_cast<size_t>(r)].pid, ::getpid());
    EXPECT_EQ(peers[static_cast<size_t>(r)].hostId, peers[0].hostId);
    EXPECT_FALSE(peers[static_cast<size_t>(r)].bootstrapAddress.empty());
  }
  destroyAll(comms);
}
