// One thread driving several ranks, NCCL's multi-device idiom and what
// nccl-tests -g does: loomCommInitAll, then per round loomGroupStart, one
// call per rank, loomGroupEnd. Every collective and a send/receive ring,
// with the NULL stream, a stream per rank and one shared stream, on 2, 4 and
// 8 ranks, and with the ranks spread over processes that each drive theirs
// from one thread. Each result is checked exactly, and LOOM_TIMEOUT_MS is
// short, so a rank left waiting on a peer its thread never started fails.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/support/group_round.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/ranks.hpp"

namespace {

using loom::check::Coll;
using loom::test::GroupStreams;
using loom::test::ScopedEnv;

constexpr Coll kEveryCall[] = {Coll::Broadcast, Coll::Reduce,  Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather,
                               Coll::AlltoAll,  Coll::Gather, Coll::Scatter,   Coll::SendRecv};

const char* streamsName(GroupStreams s) {
  switch (s) {
    case GroupStreams::Null: return "null";
    case GroupStreams::PerRank: return "rank";
    case GroupStreams::Shared: return "shared";
  }
  return "?";
}

class OneThreadGroups : public ::testing::TestWithParam<std::tuple<int, GroupStreams>> {};

TEST_P(OneThreadGroups, EveryCallOfEveryRankIsExact) {
  const auto [n, streams] = GetParam();
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "10000");
  std::vector<loomComm_t> comms(static_cast<size_t>(n));
  ASSERT_EQ(loomCommInitAll(comms.data(), n, nullptr), loomSuccess) << loomGetLastError(nullptr);
  for (Coll coll : kEveryCall) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}, size_t{100003}}) {
      const int root = static_cast<int>(count % static_cast<size_t>(n));
      EXPECT_EQ(loom::test::runGroupRound(comms, 0, n, coll, count, root, streams), "")
          << loom::check::collName(coll) << " of " << count;
    }
  }
  loom::test::destroyAll(comms);
}

INSTANTIATE_TEST_SUITE_P(RanksAndStreams, OneThreadGroups,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(GroupStreams::Null, GroupStreams::PerRank,
                                                              GroupStreams::Shared)),
                         [](const auto& param) {
                           return std::to_string(std::get<0>(param.param)) + "ranks_" +
                                  streamsName(std::get<1>(param.param));
                         });

// The sockets between threads of one process, and the direct algorithms
// (which post on the engine instead of the rings' FIFOs), take the same
// idiom.
TEST(OneThreadGroupsOverSockets, EveryCallIsExactWithRingsAndDirect) {
  ScopedEnv transport("LOOM_TRANSPORT", "socket");
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "10000");
  for (const char* algorithm : {"ring", "direct"}) {
    ScopedEnv algo("LOOM_ALGO", algorithm);
    std::vector<loomComm_t> comms(3);
    ASSERT_EQ(loomCommInitAll(comms.data(), 3, nullptr), loomSuccess) << loomGetLastError(nullptr);
    for (Coll coll : kEveryCall) {
      EXPECT_EQ(loom::test::runGroupRound(comms, 0, 3, coll, 5000, 1, GroupStreams::Null), "")
          << algorithm << ": " << loom::check::collName(coll);
    }
    loom::test::destroyAll(comms);
  }
}

std::string hexOf(const loomUniqueId& id) {
  std::string hex;
  for (char c : id.internal) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", static_cast<unsigned char>(c));
    hex += two;
  }
  return hex;
}

// Five ranks over three processes: two that each drive two ranks from one
// thread, and one with a single rank.
TEST(OneThreadGroupsAcrossProcesses, MixWithRanksOfOtherProcesses) {
  for (const char* streams : {"null", "rank"}) {
    loomUniqueId id;
    ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
    const std::string hex = hexOf(id);
    const std::map<std::string, std::string> env{{"LOOM_TIMEOUT_MS", "20000"}};
    auto results = loom::test::runProcesses({{LOOM_TEST_GROUP_BIN, hex, "5", "0", "2", streams},
                                             {LOOM_TEST_GROUP_BIN, hex, "5", "2", "2", streams},
                                             {LOOM_TEST_GROUP_BIN, hex, "5", "4", "1", streams}},
                                            {env, env, env}, std::chrono::seconds(100));
    for (size_t p = 0; p < results.size(); ++p) {
      EXPECT_EQ(results[p].exitCode, 0) << streams << ", process " << p << ":\n" << results[p].output;
      EXPECT_NE(results[p].output.find("ok\n"), std::string::npos) << results[p].output;
    }
  }
}

}  // namespace

namespace {

// A group with nothing in it ends in success, as does one whose every call
// was refused when it was made (the refusal was that call's result).
TEST(Groups, AnEmptyGroupOrOneOfRefusedCallsEndsInSuccess) {
  auto comms = loom::test::initThreadComms(1);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  EXPECT_EQ(loomGroupEnd(), loomSuccess);
  int32_t x = 0;
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  EXPECT_EQ(loomSend(&x, 1, static_cast<loomDataType_t>(1000), 0, comms[0], nullptr), loomInvalidArgument);
  EXPECT_EQ(loomAllReduce(&x, &x, 1, loomInt32, loomSum, nullptr, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comms[0]);
  loom::test::destroyAll(comms);
}

}  // namespace

namespace {

// Polls a non-blocking communicator until its init has ended, as PyTorch
// does (every 2 ms), within `limit`; its last state.
loomResult_t awaitReady(loomComm_t comm, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  loomResult_t state = loomInProgress;
  while (loomCommGetAsyncError(comm, &state) == loomSuccess && state == loomInProgress &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return state;
}

// nccl-tests' init with -g/-t, from one thread: loomGroupStart, one
// loomCommInitRankConfig per rank, loomGroupEnd. Created at the call, rank
// 0 would wait in the rendezvous for rank 1 until LOOM_TIMEOUT_MS; deferred
// to the group's end they meet. Then every collective of every rank, in
// one group each, exactly.
class CreatedInAGroup : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(CreatedInAGroup, OneThreadCreatesEveryRankThenRunsEveryCollective) {
  const auto [n, blocking] = GetParam();
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "10000");
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  std::vector<loomComm_t> comms(static_cast<size_t>(n));
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(loomCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &config),
              blocking ? loomSuccess : loomInProgress)
        << loomGetLastError(nullptr);
    ASSERT_NE(comms[static_cast<size_t>(r)], nullptr);
  }
  // Nothing ran yet: the first rank's init has not begun.
  loomResult_t state = loomSuccess;
  ASSERT_EQ(loomCommGetAsyncError(comms[0], &state), loomSuccess);
  EXPECT_EQ(state, loomInProgress);
  ASSERT_EQ(loomGroupEnd(), blocking ? loomSuccess : loomInProgress) << loomGetLastError(nullptr);
  for (loomComm_t comm : comms) ASSERT_EQ(awaitReady(comm, std::chrono::seconds(20)), loomSuccess);
  for (int r = 0; r < n; ++r) {
    int rank = -1, count = 0;
    ASSERT_EQ(loomCommUserRank(comms[static_cast<size_t>(r)], &rank), loomSuccess);
    ASSERT_EQ(loomCommCount(comms[static_cast<size_t>(r)], &count), loomSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, n);
  }
  for (Coll coll : kEveryCall) {
    for (size_t count : {size_t{1}, size_t{1003}}) {
      EXPECT_EQ(loom::test::runGroupRound(comms, 0, n, coll, count, n - 1, GroupStreams::Null), "")
          << loom::check::collName(coll) << " of " << count;
    }
  }
  loom::test::destroyAll(comms);
}

INSTANTIATE_TEST_SUITE_P(RanksAndModes, CreatedInAGroup,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()),
                         [](const auto& param) {
                           return std::to_string(std::get<0>(param.param)) + "ranks_" +
                                  (std::get<1>(param.param) ? "blocking" : "nonblocking");
                         });

// One group holding the inits of new ranks and an all-reduce of ranks
// built before: the inits run first, the all-reduce after, both complete.
// Then the old ranks split in a group (one thread, every rank), and the
// halves reduce exactly.
TEST(CreatedInAGroup, InitsMixWithCallsAndSplitsOfOneThread) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "10000");
  constexpr int n = 4;
  auto old = loom::test::initThreadComms(n);
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> fresh(2);
  std::vector<int32_t> values(n);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(loomCommInitRank(&fresh[static_cast<size_t>(r)], 2, id, r), loomSuccess);
  for (int r = 0; r < n; ++r) {
    values[static_cast<size_t>(r)] = r + 1;
    ASSERT_EQ(loomAllReduce(&values[static_cast<size_t>(r)], &values[static_cast<size_t>(r)], 1, loomInt32, loomSum,
                            old[static_cast<size_t>(r)], nullptr),
              loomSuccess);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  for (int32_t v : values) EXPECT_EQ(v, 1 + 2 + 3 + 4);
  EXPECT_EQ(loom::test::runGroupRound(fresh, 0, 2, Coll::AllReduce, 1000, 0, GroupStreams::Null), "");

  std::vector<loomComm_t> halves(n, nullptr);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(loomCommSplit(old[static_cast<size_t>(r)], r % 2, -r, &halves[static_cast<size_t>(r)], nullptr),
              loomSuccess);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    ASSERT_NE(halves[static_cast<size_t>(r)], nullptr);
    int rank = -1;
    ASSERT_EQ(loomCommUserRank(halves[static_cast<size_t>(r)], &rank), loomSuccess);
    EXPECT_EQ(rank, 1 - r / 2) << "key -r orders each half backwards";
    values[static_cast<size_t>(r)] = r + 1;
  }
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(loomAllReduce(&values[static_cast<size_t>(r)], &values[static_cast<size_t>(r)], 1, loomInt32, loomSum,
                            halves[static_cast<size_t>(r)], nullptr),
              loomSuccess);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(values, (std::vector<int32_t>{1 + 3, 2 + 4, 1 + 3, 2 + 4}));
  loom::test::destroyAll(halves);
  loom::test::destroyAll(fresh);
  loom::test::destroyAll(old);
}

// An init that fails at the group's end (nranks that do not agree) is the
// group's end's error, naming it, and never a hang.
TEST(CreatedInAGroup, AFailedInitIsTheGroupsError) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "2000");
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(1, nullptr);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  ASSERT_EQ(loomCommInitRank(&comms[0], 2, id, 0), loomSuccess);  // rank 1 never comes
  EXPECT_NE(loomGroupEnd(), loomSuccess);
  EXPECT_NE(std::string(loomGetLastError(nullptr)), "");
  loomResult_t state = loomSuccess;
  ASSERT_EQ(loomCommGetAsyncError(comms[0], &state), loomSuccess);
  EXPECT_NE(state, loomSuccess);
  EXPECT_NE(state, loomInProgress);
  EXPECT_EQ(loomCommDestroy(comms[0]), loomSuccess);
}

}  // namespace

namespace {

// A non-blocking communicator's finalize returns loomInProgress at once and
// its state turns to loomSuccess only when the work queued on its streams is
// done, as NCCL's; a blocking one's returns when done.
TEST(CreatedInAGroup, ANonBlockingFinalizeIsPolledUntilItsStreamsAreDone) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "10000");
  constexpr int n = 2;
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 0;
  std::vector<loomComm_t> comms(n);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(loomCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &config), loomInProgress);
  }
  ASSERT_EQ(loomGroupEnd(), loomInProgress);
  for (loomComm_t comm : comms) ASSERT_EQ(awaitReady(comm, std::chrono::seconds(20)), loomSuccess);
  constexpr size_t kCount = size_t{4} << 20;
  std::vector<std::vector<int32_t>> data(n, std::vector<int32_t>(kCount));
  std::vector<loomStream_t> streams(n);
  for (int r = 0; r < n; ++r) {
    std::fill(data[static_cast<size_t>(r)].begin(), data[static_cast<size_t>(r)].end(), r + 1);
    ASSERT_EQ(loomStreamCreate(&streams[static_cast<size_t>(r)]), loomSuccess);
  }
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int round = 0; round < 4; ++round) {
    for (int r = 0; r < n; ++r) {
      auto& d = data[static_cast<size_t>(r)];
      ASSERT_EQ(loomAllReduce(d.data(), d.data(), kCount, loomInt32, loomMax, comms[static_cast<size_t>(r)],
                              streams[static_cast<size_t>(r)]),
                loomSuccess);
    }
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess);
  for (loomComm_t comm : comms) EXPECT_EQ(loomCommFinalize(comm), loomInProgress) << loomGetLastError(comm);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(awaitReady(comms[static_cast<size_t>(r)], std::chrono::seconds(20)), loomSuccess);
    // Finalized means the streams' work is done: every element is there.
    const auto& d = data[static_cast<size_t>(r)];
    EXPECT_EQ(std::count(d.begin(), d.end(), n), static_cast<std::ptrdiff_t>(kCount)) << "rank " << r;
  }
  for (int r = 0; r < n; ++r) ASSERT_EQ(loomStreamDestroy(streams[static_cast<size_t>(r)]), loomSuccess);
  loom::test::destroyAll(comms);
}

}  // namespace
