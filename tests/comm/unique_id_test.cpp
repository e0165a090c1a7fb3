// A unique id carries the root's address and secret, and refuses garbage;
// LOOM_COMM_ID fixes the root's address.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "comm/bootstrap/root.hpp"
#include "comm/bootstrap/unique_id.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/ranks.hpp"

TEST(UniqueId, RoundTrips) {
  loom::UniqueIdData data{loom::net::SocketAddress::parse("10.1.2.3:4567"), loom::Secret::random()};
  auto decoded = loom::decodeUniqueId(loom::encodeUniqueId(data));
  EXPECT_EQ(decoded.root.toString(), "10.1.2.3:4567");
  EXPECT_TRUE(decoded.secret == data.secret);
}

TEST(UniqueId, TwoIdsHaveDifferentSecrets) {
  loomUniqueId a, b;
  ASSERT_EQ(loomGetUniqueId(&a), loomSuccess);
  ASSERT_EQ(loomGetUniqueId(&b), loomSuccess);
  EXPECT_FALSE(loom::decodeUniqueId(a).secret == loom::decodeUniqueId(b).secret);
}

TEST(UniqueId, GarbageIsInvalidArgument) {
  loomUniqueId id;
  std::memset(id.internal, 0x5a, sizeof id.internal);
  loomComm_t comm = nullptr;
  EXPECT_EQ(loomCommInitRank(&comm, 1, id, 0), loomInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("commId"), std::string::npos) << loomGetLastError(nullptr);
}

TEST(UniqueId, TruncatedCopyIsInvalidArgument) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::memset(id.internal + 64, 0, sizeof id.internal - 64);  // only the first half arrived
  loomComm_t comm = nullptr;
  EXPECT_EQ(loomCommInitRank(&comm, 1, id, 0), loomInvalidArgument);
}

TEST(UniqueId, EverySingleBitFlipIsDetected) {
  loom::UniqueIdData data{loom::net::SocketAddress::parse("127.0.0.1:9"), loom::Secret::random()};
  loomUniqueId good = loom::encodeUniqueId(data);
  for (size_t bit = 0; bit < 8 * sizeof good.internal; ++bit) {
    loomUniqueId bad = good;
    bad.internal[bit / 8] = static_cast<char>(bad.internal[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_THROW(loom::decodeUniqueId(bad), loom::Error) << "bit " << bit;
  }
}

// LOOM_COMM_ID (NCCL_COMM_ID's): every rank makes the id itself, the same
// bytes, with no root started by loomGetUniqueId; the communicator's rank 0
// starts the root at that address at its init, here after its peers have
// begun to call (they retry until it listens). Twice on one port: the
// first root lets it go once every rank has come.
TEST(UniqueId, CommIdGivesEveryRankTheSameIdAndRankZeroStartsTheRoot) {
  const std::string at = "127.0.0.1:" + std::to_string(loom::test::freePort());
  loom::test::ScopedEnv fixed("LOOM_COMM_ID", at);
  constexpr int kRanks = 3;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<loomUniqueId> ids(kRanks);
    std::vector<loomComm_t> comms(kRanks, nullptr);
    const size_t roots = loom::runningRendezvousRoots();
    loom::test::onThreads(kRanks, [&](int r) {
      const auto i = static_cast<size_t>(r);
      ASSERT_EQ(loomGetUniqueId(&ids[i]), loomSuccess) << loomGetLastError(nullptr);
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ASSERT_EQ(loomCommInitRank(&comms[i], kRanks, ids[i], r), loomSuccess) << loomGetLastError(nullptr);
      int value = r + 1;
      ASSERT_EQ(loomAllReduce(&value, &value, 1, loomInt32, loomSum, comms[i], nullptr), loomSuccess);
      EXPECT_EQ(value, kRanks * (kRanks + 1) / 2);
    });
    for (int r = 1; r < kRanks; ++r) {
      EXPECT_EQ(std::memcmp(ids[0].internal, ids[static_cast<size_t>(r)].internal, sizeof ids[0].internal), 0);
    }
    EXPECT_EQ(loom::decodeUniqueId(ids[0]).root.toString(), at);
    loom::test::destroyAll(comms);
    EXPECT_LE(loom::runningRendezvousRoots(), roots + 1);  // rank 0's, finishing; none from loomGetUniqueId
  }
  // Without it, ids differ again.
  {
    loom::test::ScopedEnv unset("LOOM_COMM_ID", "");
    loomUniqueId a, b;
    ASSERT_EQ(loomGetUniqueId(&a), loomSuccess);
    ASSERT_EQ(loomGetUniqueId(&b), loomSuccess);
    EXPECT_FALSE(loom::decodeUniqueId(a).secret == loom::decodeUniqueId(b).secret);
  }
}

// The id's secret is LOOM_STORE_SECRET where that is set.
TEST(UniqueId, CommIdTakesTheStoreSecretWhereSet) {
  loom::test::ScopedEnv fixed("LOOM_COMM_ID", "127.0.0.1:9");
  const std::string hex = "00112233445566778899aabbccddeeff";
  loom::test::ScopedEnv secret("LOOM_STORE_SECRET", hex);
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  EXPECT_TRUE(loom::decodeUniqueId(id).secret == loom::Secret::fromHex(hex, "test"));
}

// A LOOM_COMM_ID that is no address, or one rank 0 cannot listen on, is
// named, not a hang.
TEST(UniqueId, CommIdThatIsNoAddressOrNotThisHostsIsNamed) {
  {
    loom::test::ScopedEnv fixed("LOOM_COMM_ID", "no-port-here");
    loomUniqueId id;
    EXPECT_EQ(loomGetUniqueId(&id), loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(nullptr)).find("LOOM_COMM_ID=no-port-here"), std::string::npos)
        << loomGetLastError(nullptr);
  }
  loom::test::ScopedEnv fixed("LOOM_COMM_ID", "192.0.2.1:" + std::to_string(loom::test::freePort()));  // TEST-NET-1
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = nullptr;
  EXPECT_EQ(loomCommInitRank(&comm, 1, id, 0), loomSystemError);
  EXPECT_EQ(comm, nullptr);
  const std::string why = loomGetLastError(nullptr);
  EXPECT_NE(why.find("rank 0 cannot start the rendezvous root at LOOM_COMM_ID=192.0.2.1"), std::string::npos) << why;
}
