// loomrun: rank environment, output prefixes, and ending a failed job.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/support/processes.hpp"
#include "tests/support/text_match.hpp"

using loom::test::runProcess;
using namespace std::chrono_literals;

TEST(Loomrun, SetsTheRankEnvironmentAndPrefixesLines) {
  auto r = runProcess({LOOMRUN_BIN, "-n", "3", "--", "sh", "-c",
                       "echo rank=$LOOM_RANK size=$LOOM_WORLD_SIZE local=$LOOM_LOCAL_RANK store=${LOOM_STORE_ADDR%%/tmp*}; "
                       "echo err >&2"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  for (int i = 0; i < 3; ++i) {
    std::string s = std::to_string(i);
    EXPECT_NE(r.output.find("[" + s + "] rank=" + s + " size=3 local=" + s + " store=file://"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("[" + s + "] err"), std::string::npos) << r.output;
  }
}

// Every rank of a job gets the same fresh 128-bit LOOM_STORE_SECRET; two
// jobs get different ones, and one the caller set is passed on.
TEST(Loomrun, GivesEveryJobAFreshStoreSecret) {
  const auto secrets = [](const std::map<std::string, std::string>& env) {
    auto r = runProcess({LOOMRUN_BIN, "-n", "2", "--", "sh", "-c", "echo secret=$LOOM_STORE_SECRET"}, env);
    EXPECT_EQ(r.exitCode, 0) << r.output;
    std::set<std::string> found;
    for (const auto& m : loom::test::searchAll(r.output, "secret=([0-9a-f]*)")) found.insert(m[1]);
    return found;
  };
  const auto first = secrets({{"LOOM_STORE_SECRET", ""}});
  ASSERT_EQ(first.size(), 1u);  // one secret, shared by both ranks
  EXPECT_EQ(first.begin()->size(), 32u);
  EXPECT_NE(secrets({{"LOOM_STORE_SECRET", ""}}), first);
  const std::string given = "00112233445566778899aabbccddeeff";
  EXPECT_EQ(secrets({{"LOOM_STORE_SECRET", given}}), std::set<std::string>{given});
}

TEST(Loomrun, AFailedRankEndsTheJobWithItsStatus) {
  // Rank 1 exits with 3; the others would sleep for ten minutes and must be ended.
  auto r = runProcess({LOOMRUN_BIN, "-n", "4", "--", "sh", "-c", "if [ $LOOM_RANK = 1 ]; then exit 3; fi; sleep 600"},
                      {}, 60s);
  EXPECT_EQ(r.exitCode, 3) << r.output;
  EXPECT_NE(r.output.find("loomrun: rank 1 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with status 3"), std::string::npos) << r.output;
  EXPECT_LT(r.elapsed, 15s);
}

TEST(Loomrun, AKilledRankIsNamedWithItsSignal) {
  auto r = runProcess({LOOMRUN_BIN, "-n", "2", "--", "sh", "-c", "if [ $LOOM_RANK = 1 ]; then kill -9 $$; fi; sleep 600"},
                      {}, 60s);
  EXPECT_EQ(r.exitCode, 128 + 9) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos);
  EXPECT_NE(r.output.find("killed by signal 9"), std::string::npos) << r.output;
  EXPECT_LT(r.elapsed, 15s);
}

TEST(Loomrun, BadArguments) {
  EXPECT_EQ(runProcess({LOOMRUN_BIN, "-n", "0", "true"}).exitCode, 2);
  EXPECT_EQ(runProcess({LOOMRUN_BIN, "true"}).exitCode, 2);
  auto r = runProcess({LOOMRUN_BIN, "-n", "1", "/nonexistent/program"});
  EXPECT_EQ(r.exitCode, 127);
  EXPECT_NE(r.output.find("cannot execute"), std::string::npos) << r.output;
}

TEST(Loomrun, ADeadRankFailsTheOthersInsteadOfHangingThem) {
  // Rank 1 exits right after init; the others are in barriers with it and
  // must fail (naming rank 1) rather than wait out the default timeout.
  auto r = runProcess({LOOMRUN_BIN, "-n", "4", LOOM_TEST_RANK_BIN, "4", "1:exit:3"}, {}, 60s);
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_LT(r.elapsed, 15s);
}
