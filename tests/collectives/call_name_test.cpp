// A collective's name as errors give it: "<collective> #<number>", counted up
// in place from one call to the next, rewritten where that cannot be done.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "collectives/call_name.hpp"

namespace loom::coll {
namespace {

std::string expected(CollectiveKind kind, uint64_t number) {
  return std::string(collectiveName(kind)) + " #" + std::to_string(number);
}

TEST(CallName, ConsecutiveCallsCountUpThroughEveryCarry) {
  CallName name;
  for (uint32_t n = 1; n <= 100'123; ++n) {
    const std::string& got = name.name(CollectiveKind::AllReduce, n);
    if (got != expected(CollectiveKind::AllReduce, n)) FAIL() << "call " << n << " named " << got;
  }
  EXPECT_EQ(name.last(), "allreduce #100123");
}

TEST(CallName, PiecesOfOneCallKeepItsName) {
  CallName name;
  EXPECT_EQ(name.name(CollectiveKind::Broadcast, 9), "broadcast #9");
  EXPECT_EQ(name.name(CollectiveKind::Broadcast, 9), "broadcast #9");
  EXPECT_EQ(name.name(CollectiveKind::Broadcast, 10), "broadcast #10");
}

TEST(CallName, AnotherCollectiveOrAJumpIsWrittenOut) {
  CallName name;
  EXPECT_EQ(name.name(CollectiveKind::AllGather, 99), "allgather #99");
  EXPECT_EQ(name.name(CollectiveKind::ReduceScatter, 100), "reducescatter #100");
  EXPECT_EQ(name.name(CollectiveKind::ReduceScatter, 7), "reducescatter #7");
  EXPECT_EQ(name.name(CollectiveKind::ReduceScatter, 1'000'000), "reducescatter #1000000");
  EXPECT_EQ(name.name(CollectiveKind::AllGather, 1'000'001), "allgather #1000001");
  EXPECT_EQ(name.name(CollectiveKind::Scatter, 0), "scatter #0");
  EXPECT_EQ(name.name(CollectiveKind::Scatter, 1), "scatter #1");
}

TEST(CallName, TheLastNumberWrapsToZero) {
  CallName name;
  EXPECT_EQ(name.name(CollectiveKind::Gather, UINT32_MAX - 1), "gather #4294967294");
  EXPECT_EQ(name.name(CollectiveKind::Gather, UINT32_MAX), "gather #4294967295");
  EXPECT_EQ(name.name(CollectiveKind::Gather, 0), "gather #0");
  EXPECT_EQ(name.name(CollectiveKind::Gather, 1), "gather #1");
}

}  // namespace
}  // namespace loom::coll
