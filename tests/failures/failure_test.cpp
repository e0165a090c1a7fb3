// Deadlines, a missing rank, abort from another thread, bad rendezvous claims.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <chrono>
#include <thread>

#include "comm/bootstrap/root.hpp"
#include "tests/support/ranks.hpp"

using loom::test::onThreads;
using loom::test::ScopedEnv;
using namespace std::chrono_literals;

TEST(Failure, MissingRankTimesOutNamingIt) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "1500");
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> errors(2);
  onThreads(2, [&](int r) {  // ranks 0 and 1 of 4: ranks 2 and 3 never come
    loomComm_t comm = nullptr;
    EXPECT_EQ(loomCommInitRank(&comm, 4, id, r), loomTimeout);
    EXPECT_EQ(comm, nullptr);
    errors[static_cast<size_t>(r)] = loomGetLastError(nullptr);
  });
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(elapsed, 1500ms + 5s);
  for (const auto& e : errors) EXPECT_NE(e.find("rank(s) 2, 3 of 4 never arrived"), std::string::npos) << e;
}

TEST(Failure, AbortUnblocksARankStuckInInit) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  loomComm_t comm = nullptr;
  ASSERT_EQ(loomCommInitRankConfig(&comm, 2, id, 0, &config), loomInProgress);  // rank 1 never comes
  std::this_thread::sleep_for(200ms);
  loomResult_t state = loomSuccess;
  ASSERT_EQ(loomCommGetAsyncError(comm, &state), loomSuccess);
  EXPECT_EQ(state, loomInProgress);
  int count = 0;
  EXPECT_EQ(loomCommCount(comm, &count), loomInProgress);
  auto t0 = std::chrono::steady_clock::now();
  std::thread aborter([&] { EXPECT_EQ(loomCommAbort(comm), loomSuccess); });
  aborter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST(Failure, AbortFromAnotherThreadUnblocksABarrier) {
  auto comms = loom::test::initThreadComms(2);
  loomResult_t result = loomSuccess;
  std::thread waiter([&] {  // rank 0 waits for rank 1, which never comes
    result = loomCommBarrier(comms[0]);
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(loom::test::abortOnceInside(comms[0]), loomSuccess);
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);  // the default deadline is far longer
  EXPECT_EQ(result, loomInvalidUsage);
  comms[0] = nullptr;
  loom::test::destroyAll(comms);
}

TEST(Failure, BarrierWithASilentPeerTimesOut) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = 500;
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(2, nullptr);
  onThreads(2, [&](int r) { ASSERT_EQ(loomCommInitRankConfig(&comms[static_cast<size_t>(r)], 2, id, r, &config), loomSuccess); });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(loomCommBarrier(comms[0]), loomTimeout);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(elapsed, 450ms);
  EXPECT_LT(elapsed, 500ms + 5s);
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("rank 1"), std::string::npos) << loomGetLastError(comms[0]);
  loom::test::destroyAll(comms);
}

TEST(Failure, DuplicateRankIsInvalidArgumentOnEveryClaimant) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "10000");
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomResult_t> results(2);
  onThreads(2, [&](int r) {
    loomComm_t comm = nullptr;
    results[static_cast<size_t>(r)] = loomCommInitRank(&comm, 3, id, 1);  // both claim rank 1
    if (results[static_cast<size_t>(r)] == loomInvalidArgument) {
      EXPECT_NE(std::string(loomGetLastError(nullptr)).find("duplicate rank"), std::string::npos);
    }
  });
  EXPECT_EQ(results[0], loomInvalidArgument);
  EXPECT_EQ(results[1], loomInvalidArgument);
}

TEST(Failure, MismatchedRankCountIsInvalidArgument) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomResult_t> results(2);
  onThreads(2, [&](int r) {
    loomComm_t comm = nullptr;
    results[static_cast<size_t>(r)] = loomCommInitRank(&comm, r == 0 ? 2 : 3, id, r);
    EXPECT_NE(std::string(loomGetLastError(nullptr)).find("nranks"), std::string::npos);
  });
  EXPECT_EQ(results[0], loomInvalidArgument);
  EXPECT_EQ(results[1], loomInvalidArgument);
}

TEST(Failure, RootsEndWhenTheirRendezvousIsDone) {
  // Roots of earlier tests' abandoned rendezvous may still be waiting out their deadlines.
  const size_t before = loom::runningRendezvousRoots();
  auto comms = loom::test::initThreadComms(3);
  loom::test::destroyAll(comms);
  for (int i = 0; i < 200 && loom::runningRendezvousRoots() > before; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_LE(loom::runningRendezvousRoots(), before);
}
