// A unique id carries the root's address and secret, and refuses garbage.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <cstring>

#include "base/error.hpp"
#include "comm/bootstrap/unique_id.hpp"

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
