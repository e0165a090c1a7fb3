// Real faults in real processes: a rank SIGKILLed or SIGSTOPped in the middle
// of a large all-reduce. Every other rank must fail with loomRemoteError
// naming it, within the bound the watchdog promises, then shrink to the
// survivors and all-reduce correctly among them (tests/programs/fault_rank.cpp).
// Also: loomCommShrink's arguments, a shrink that excludes live ranks, and
// strangers at a running communicator's bootstrap listener.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/bytes.hpp"
#include "base/secret.hpp"
#include "comm/bootstrap/frame.hpp"
#include "comm/communicator.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/text_match.hpp"

using namespace std::chrono_literals;
using loom::test::ScopedEnv;

namespace {

struct FaultRun {
  std::vector<loom::test::ProcessResult> ranks;
  std::vector<double> detectedMs;  // per survivor
};

// n ranks of loom_test_fault on this host, the ranks `victims` failing as `mode`.
FaultRun runFault(const std::string& mode, int n, std::vector<int> victims, size_t count,
                  std::map<std::string, std::string> extra) {
  std::string list;
  for (int v : victims) list += (list.empty() ? "" : ",") + std::to_string(v);
  const std::string dir = ::testing::TempDir() + "loom-fault-" + std::to_string(::getpid()) + "-" + mode;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < n; ++r) {
    argvs.push_back({LOOM_TEST_FAULT_BIN, mode, list, dir, std::to_string(count)});
    auto env = extra;
    env["LOOM_RANK"] = std::to_string(r);
    env["LOOM_WORLD_SIZE"] = std::to_string(n);
    env["LOOM_STORE_ADDR"] = "file://" + dir + "/store";
    envs.push_back(env);
  }
  FaultRun run;
  run.ranks = loom::test::runProcesses(argvs, envs, 90s);  // inside ctest's limit: a hang shows the output
  for (int r = 0; r < n; ++r) {
    const bool victim = std::find(victims.begin(), victims.end(), r) != victims.end();
    if (victim) continue;
    if (auto m = loom::test::search(run.ranks[static_cast<size_t>(r)].output, "detected after ([0-9.]+) ms")) {
      run.detectedMs.push_back(std::stod((*m)[1]));
    }
  }
  std::filesystem::remove_all(dir);
  std::string seen;
  for (double ms : run.detectedMs) seen += " " + std::to_string(ms);
  std::printf("detection (%s, victim ranks %s): survivors' errors after [ms]%s\n", mode.c_str(), list.c_str(),
              seen.c_str());
  return run;
}

void expectSurvivorsRecovered(const FaultRun& run, std::vector<int> victims, int signal) {
  std::string failed = "failed ranks:";
  for (int v : victims) failed += " " + std::to_string(v);
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& res = run.ranks[r];
    if (std::find(victims.begin(), victims.end(), static_cast<int>(r)) != victims.end()) {
      EXPECT_EQ(res.exitCode, 128 + signal) << res.output;
      continue;
    }
    EXPECT_EQ(res.exitCode, 0) << "rank " << r << ":\n" << res.output;
    EXPECT_NE(res.output.find(failed + "\n"), std::string::npos) << res.output;
    EXPECT_NE(res.output.find("survivors' rank"), std::string::npos) << res.output;
  }
  EXPECT_EQ(run.detectedMs.size(), run.ranks.size() - victims.size());
}

double maxOf(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

}  // namespace

// Over shared memory: the victim's neighbours see its segment's control
// socket close, the others hear it from the watchdog of its next rank.
TEST(Faults, AKilledRankFailsEveryOtherRankAndTheSurvivorsShrink) {
  auto run = runFault("kill", 4, {2}, 4u << 20, {});
  expectSurvivorsRecovered(run, {2}, SIGKILL);
  EXPECT_LT(maxOf(run.detectedMs), 2000.0);  // the bound docs/failures.md states for a dead process
  // Rank 0's report: the others answered where they were, the victim is gone.
  const std::string& report = run.ranks[0].output;
  EXPECT_NE(report.find("where every rank is, as rank 0 asked them:"), std::string::npos) << report;
  EXPECT_TRUE(loom::test::contains(report, "rank 1: (in|idle after) allreduce #[0-9]+")) << report;
  // Unreachable when asked; not asked once rank 3's notice named it.
  EXPECT_TRUE(loom::test::contains(report, "rank 2: (unreachable|failed, not asked)")) << report;
}

TEST(Faults, AKilledRankOverSocketsFailsEveryOtherRank) {
  auto run = runFault("kill", 4, {1}, 1u << 20, {{"LOOM_TRANSPORT", "socket"}});
  expectSurvivorsRecovered(run, {1}, SIGKILL);
  EXPECT_LT(maxOf(run.detectedMs), 2000.0);
}

// Alive but stuck: only the missing heartbeats tell (5 x 200 ms here), long
// before the operations' own LOOM_TIMEOUT_MS.
TEST(Faults, AStoppedRankIsDeclaredFailedAfterItsHeartbeatsStop) {
  auto run = runFault("stop", 4, {3}, 1u << 20, {{"LOOM_HEARTBEAT_MS", "200"}, {"LOOM_TIMEOUT_MS", "60000"}});
  expectSurvivorsRecovered(run, {3}, SIGKILL);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_NE(run.ranks[r].output.find("rank 3 failed: sent no heartbeat for 1000 ms"), std::string::npos)
        << run.ranks[r].output;
  }
  // Rank 0 watches rank 3 and declared it itself: its survey does not wait a
  // second for an answer the stopped rank would never give.
  EXPECT_NE(run.ranks[0].output.find("rank 3: failed, not asked"), std::string::npos) << run.ranks[0].output;
  EXPECT_LT(maxOf(run.detectedMs), 1000.0 + 2000.0);  // silence, then at most a notice's delivery
}

// A program that gives up on a failure aborts its communicator the moment
// it hears of it. The victim's watcher (rank 2) does so here, and rank 0,
// which watches rank 2 and makes no call, must still learn that rank 1
// failed, not that rank 2 did: the watcher's notices go out before its
// abort ends, and rank 0 reads them before it declares the rank whose
// heartbeats ended. Five times, since the race it guards against is one.
TEST(Faults, AWatcherThatAbortsOnHearingOfAFailureStillNamesTheFailedRank) {
  for (int round = 0; round < 5; ++round) {
    auto run = runFault("kill-watcher-aborts", 3, {1}, 1u << 16, {});
    EXPECT_EQ(run.ranks[1].exitCode, 128 + SIGKILL) << run.ranks[1].output;
    EXPECT_EQ(run.ranks[2].exitCode, 0) << run.ranks[2].output;
    EXPECT_EQ(run.ranks[0].exitCode, 0) << "round " << round << ":\n" << run.ranks[0].output;
    EXPECT_NE(run.ranks[0].output.find("rank 0: first failed rank 1\n"), std::string::npos) << run.ranks[0].output;
  }
}

// Neighbours on the heartbeat ring, killed together: rank 2 watched rank 1,
// so rank 3, which declares rank 2, watches rank 1 next, and finds it gone
// (its listener refuses) at once. Both are named, and the survivors shrink
// around both.
TEST(Faults, TwoNeighboursKilledTogetherAreBothNamed) {
  auto run = runFault("kill", 5, {1, 2}, 1u << 20, {{"LOOM_TRANSPORT", "socket"}});
  expectSurvivorsRecovered(run, {1, 2}, SIGKILL);
  EXPECT_LT(maxOf(run.detectedMs), 2000.0);
}

// Stopped together, they do not refuse: the silence of each is what tells,
// one watcher after the other (5 x 200 ms, twice).
TEST(Faults, TwoNeighboursStoppedTogetherAreBothNamed) {
  auto run = runFault("stop", 4, {2, 3}, 1u << 20, {{"LOOM_HEARTBEAT_MS", "200"}, {"LOOM_TIMEOUT_MS", "60000"}});
  expectSurvivorsRecovered(run, {2, 3}, SIGKILL);
}

TEST(FailedRanks, BadArgumentsAreNamedAndALiveCommunicatorHasNone) {
  loomComm_t comms[2];
  ASSERT_EQ(loomCommInitAll(comms, 2, nullptr), loomSuccess);
  int ranks[2] = {7, 7};
  int count = -1;
  EXPECT_EQ(loomCommGetFailedRanks(comms[0], ranks, 2, &count), loomSuccess);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(ranks[0], 7);  // nothing written
  EXPECT_EQ(loomCommGetFailedRanks(comms[0], nullptr, 0, &count), loomSuccess);
  EXPECT_EQ(loomCommGetFailedRanks(comms[0], ranks, 2, nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("count"), std::string::npos);
  EXPECT_EQ(loomCommGetFailedRanks(comms[0], ranks, -1, &count), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("maxRanks"), std::string::npos);
  EXPECT_EQ(loomCommGetFailedRanks(comms[0], nullptr, 2, &count), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("ranks"), std::string::npos);
  EXPECT_EQ(loomCommGetFailedRanks(nullptr, ranks, 2, &count), loomInvalidArgument);
  for (loomComm_t c : comms) loomCommDestroy(c);
}

TEST(Shrink, BadArgumentsAreNamed) {
  auto comms = loom::test::initThreadComms(2);
  loomComm_t out = nullptr;
  int self[] = {0};
  int outside[] = {2};
  int twice[] = {1, 1};
  const struct {
    int* list;
    int count;
    int flags;
    const char* mentions;
  } cases[] = {{self, 1, LOOM_SHRINK_DEFAULT, "holds this rank (0)"},
               {outside, 1, LOOM_SHRINK_DEFAULT, "rank 2, out of range for 2 ranks"},
               {twice, 2, LOOM_SHRINK_DEFAULT, "rank 1 twice"},
               {nullptr, 1, LOOM_SHRINK_DEFAULT, "excludeRanksList is NULL"},
               {self, -1, LOOM_SHRINK_DEFAULT, "excludeRanksCount=-1"},
               {nullptr, 0, 7, "shrinkFlags=7"}};
  for (const auto& c : cases) {
    EXPECT_EQ(loomCommShrink(comms[0], c.list, c.count, &out, nullptr, c.flags), loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(comms[0])).find(c.mentions), std::string::npos) << loomGetLastError(comms[0]);
    EXPECT_EQ(out, nullptr);
  }
  EXPECT_EQ(loomCommShrink(comms[0], self, 1, nullptr, nullptr, 0), loomInvalidArgument);
  loom::test::destroyAll(comms);
}

// No failure needed: ranks 1 and 3 of 5 step aside, the other three go on
// as ranks 0, 1, 2 of a communicator of their own, twice in a row.
TEST(Shrink, ExcludedLiveRanksAreLeftOutAndTheRestRenumbered) {
  auto comms = loom::test::initThreadComms(5);
  int exclude[] = {3, 1};
  loom::test::onThreads(5, [&](int r) {
    if (r == 1 || r == 3) return;
    loomComm_t parent = comms[static_cast<size_t>(r)];
    for (int round = 0; round < 2; ++round) {
      loomComm_t shrunk = nullptr;
      ASSERT_EQ(loomCommShrink(parent, exclude, 2, &shrunk, nullptr, LOOM_SHRINK_DEFAULT), loomSuccess)
          << loomGetLastError(parent);
      int rank = -1, size = 0;
      loomCommUserRank(shrunk, &rank);
      loomCommCount(shrunk, &size);
      EXPECT_EQ(size, 3);
      EXPECT_EQ(rank, r == 0 ? 0 : r == 2 ? 1 : 2);
      int64_t x = r;
      EXPECT_EQ(loomAllReduce(&x, &x, 1, loomInt64, loomSum, shrunk, nullptr), loomSuccess);
      EXPECT_EQ(x, 0 + 2 + 4);
      EXPECT_EQ(loomCommDestroy(shrunk), loomSuccess);
    }
  });
  loom::test::destroyAll(comms);
}

// A communicator's bootstrap listener stays open for its watchdog while it
// runs: strangers there (wrong secret, garbage, a huge length, a truncated
// header, a forged failure notice) are dropped, and the job is not disturbed.
TEST(Faults, StrangersAtARunningCommunicatorAreDroppedAndItGoesOn) {
  auto comms = loom::test::initThreadComms(2);
  const auto address = loom::net::SocketAddress::parse(comms[0]->peers()[0].bootstrapAddress);
  const loom::Secret wrong = loom::Secret::random();
  loom::ByteWriter notice;
  notice.put(int32_t{1});
  notice.put(int32_t{1});
  notice.putString("forged");
  auto huge = loom::encodeFrame(loom::FrameType::Heartbeat, wrong, {});
  for (size_t i = loom::kFrameHeaderBytes - 4; i < loom::kFrameHeaderBytes; ++i) huge[i] = std::byte{0xff};
  const std::vector<std::vector<std::byte>> strangers = {
      loom::encodeFrame(loom::FrameType::FailureNotice, wrong, notice.bytes()),
      std::vector<std::byte>(300, std::byte{0x41}), huge, std::vector<std::byte>(huge.begin(), huge.begin() + 10)};
  for (const auto& bytes : strangers) {
    auto s = loom::net::Socket::connect(address, loom::Deadline::after(5s), nullptr, "rank 0");
    s.sendAll(bytes, loom::Deadline::after(5s), nullptr);
  }
  loom::test::onThreads(2, [&](int r) {
    for (int i = 0; i < 20; ++i) {
      float x = 1;
      ASSERT_EQ(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[static_cast<size_t>(r)], nullptr), loomSuccess);
      EXPECT_EQ(x, 2.0f);
    }
  });
  std::this_thread::sleep_for(300ms);  // the watchdog has read every stranger by now
  loomResult_t state = loomInternalError;
  EXPECT_EQ(loomCommGetAsyncError(comms[0], &state), loomSuccess);
  EXPECT_EQ(state, loomSuccess);
  loom::test::destroyAll(comms);
}
