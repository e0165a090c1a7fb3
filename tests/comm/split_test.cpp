// loomCommSplit: colors, keys that reorder, NOCOLOR, splits of splits.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include "tests/support/ranks.hpp"

using loom::test::onThreads;

TEST(Split, ColorsAndReversingKeys) {
  const int n = 8;
  auto comms = loom::test::initThreadComms(n);
  std::vector<loomComm_t> subs(n, nullptr);
  onThreads(n, [&](int r) {
    int color = r == 7 ? LOOM_SPLIT_NOCOLOR : r % 3;  // {0,3,6} {1,4} {2,5}, 7 opts out
    ASSERT_EQ(loomCommSplit(comms[static_cast<size_t>(r)], color, -r, &subs[static_cast<size_t>(r)], nullptr), loomSuccess)
        << loomGetLastError(comms[static_cast<size_t>(r)]);
  });
  EXPECT_EQ(subs[7], nullptr);
  auto expect = [&](int parent, int rank, int size) {
    int gotRank = -1, gotSize = -1;
    ASSERT_NE(subs[static_cast<size_t>(parent)], nullptr);
    EXPECT_EQ(loomCommUserRank(subs[static_cast<size_t>(parent)], &gotRank), loomSuccess);
    EXPECT_EQ(loomCommCount(subs[static_cast<size_t>(parent)], &gotSize), loomSuccess);
    EXPECT_EQ(gotRank, rank) << "parent rank " << parent;
    EXPECT_EQ(gotSize, size) << "parent rank " << parent;
  };
  // Keys are -rank, so the highest parent rank comes first.
  expect(6, 0, 3); expect(3, 1, 3); expect(0, 2, 3);
  expect(4, 0, 2); expect(1, 1, 2);
  expect(5, 0, 2); expect(2, 1, 2);
  onThreads(n, [&](int r) {
    if (r != 7) {
      EXPECT_EQ(loomCommBarrier(subs[static_cast<size_t>(r)]), loomSuccess);
    }
  });

  // A split of a split: {0,3,6} by parity of the parent rank, equal keys keep parent order.
  std::vector<loomComm_t> subsubs(n, nullptr);
  onThreads(n, [&](int r) {
    if (r % 3 != 0 || r == 7) return;
    ASSERT_EQ(loomCommSplit(subs[static_cast<size_t>(r)], r % 2, 0, &subsubs[static_cast<size_t>(r)], nullptr), loomSuccess);
  });
  int size = 0, rank = -1;
  EXPECT_EQ(loomCommCount(subsubs[0], &size), loomSuccess);
  EXPECT_EQ(size, 2);  // parent ranks 6 and 0 (sub ranks 0 and 2)
  EXPECT_EQ(loomCommUserRank(subsubs[0], &rank), loomSuccess);
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(loomCommCount(subsubs[3], &size), loomSuccess);
  EXPECT_EQ(size, 1);
  loom::test::destroyAll(subsubs);
  loom::test::destroyAll(subs);
  loom::test::destroyAll(comms);
}

TEST(Split, EveryoneOptsOut) {
  auto comms = loom::test::initThreadComms(3);
  std::vector<loomComm_t> subs(3, reinterpret_cast<loomComm_t>(1));
  onThreads(3, [&](int r) {
    EXPECT_EQ(loomCommSplit(comms[static_cast<size_t>(r)], LOOM_SPLIT_NOCOLOR, 0, &subs[static_cast<size_t>(r)], nullptr), loomSuccess);
  });
  for (auto s : subs) EXPECT_EQ(s, nullptr);
  loom::test::destroyAll(comms);
}

TEST(Split, NegativeColorIsInvalidArgument) {
  auto comms = loom::test::initThreadComms(1);
  loomComm_t sub = nullptr;
  EXPECT_EQ(loomCommSplit(comms[0], -5, 0, &sub, nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("color=-5"), std::string::npos);
  loom::test::destroyAll(comms);
}
