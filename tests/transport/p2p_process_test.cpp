// Point-to-point between real processes: every dtype and count over shared
// memory and over sockets, 64 Mi elements (8 under sanitizers), floods, a ring of 8, and a peer
// killed in the middle of a large transfer.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/support/processes.hpp"
#include "tests/support/transports.hpp"

using loom::test::runProcess;
using loom::test::runProcesses;
using namespace std::chrono_literals;

namespace {

class P2pProcesses : public ::testing::TestWithParam<const char*> {
 protected:
  // loomrun -n N loom_test_p2p args..., with LOOM_TRANSPORT forced.
  loom::test::ProcessResult run(int n, std::vector<std::string> args, std::chrono::seconds timeout = 120s) {
    std::vector<std::string> argv = {LOOMRUN_BIN, "-n", std::to_string(n), LOOM_TEST_P2P_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return runProcess(argv, {{"LOOM_TRANSPORT", GetParam()}}, timeout);
  }
};

TEST_P(P2pProcesses, EveryDtypeAndCountWithEveryPeer) {
  auto r = run(4, {"matrix", LOOM_P2P_MATRIX_KIBI});
  EXPECT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("[3] rank 3 of 4: matrix ok"), std::string::npos) << r.output;
}

TEST_P(P2pProcesses, SixtyFourMebiElements) {
  auto r = run(2, {"large", LOOM_P2P_LARGE_TYPES, LOOM_P2P_LARGE_MEBI}, 300s);
  EXPECT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("large ok"), std::string::npos) << r.output;
}

TEST_P(P2pProcesses, ThousandsOfSmallMessagesBothWays) {
  auto r = run(3, {"flood"});
  EXPECT_EQ(r.exitCode, 0) << r.output;
}

TEST_P(P2pProcesses, RingOfEightInAGroup) {
  auto r = run(8, {"ring", "5"});
  EXPECT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("[7] rank 7 of 8: ring ok"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Transports, P2pProcesses, ::testing::ValuesIn(loom::test::transportsUnderTest()),
                         loom::test::transportName);

// Segments in /dev/shm that these processes made and left: theirs alone,
// since tests running beside this one may hold names of their own dead
// ranks for a moment (until their survivors sweep).
std::vector<std::string> segmentsLeftBy(const std::vector<loom::test::ProcessResult>& processes) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename();
    if (name.rfind("loom-", 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + 5, nullptr, 10);
    for (const auto& p : processes) {
      if (p.pid == pid) out.push_back(name);
    }
  }
  return out;
}

struct KillCase {
  const char* transport;
  int victim;  // 0: the sender dies, 1: the receiver dies
};

std::vector<KillCase> killCases() {
  std::vector<KillCase> cases;
  for (const char* transport : loom::test::transportsUnderTest()) {
    for (int victim : {0, 1}) cases.push_back({transport, victim});
  }
  return cases;
}

class KilledPeer : public ::testing::TestWithParam<KillCase> {};

TEST_P(KilledPeer, TheSurvivorFailsWithinTheDeadlineAndNoSegmentIsLeft) {
  const auto [transport, victim] = GetParam();
  auto store = std::filesystem::temp_directory_path() / ("loom-kill-" + std::to_string(::getpid()) + "-" + transport +
                                                          std::to_string(victim));
  std::filesystem::create_directories(store);
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < 2; ++r) {
    argvs.push_back({LOOM_TEST_P2P_BIN, "victim", std::to_string(victim), "300"});
    envs.push_back({{"LOOM_RANK", std::to_string(r)},
                    {"LOOM_LOCAL_RANK", std::to_string(r)},
                    {"LOOM_WORLD_SIZE", "2"},
                    {"LOOM_STORE_ADDR", "file://" + store.string()},
                    {"LOOM_TRANSPORT", transport},
                    {"LOOM_TIMEOUT_MS", "3000"}});
  }
  auto results = runProcesses(argvs, envs, 60s);
  std::filesystem::remove_all(store);
  const auto& killed = results[static_cast<size_t>(victim)];
  const auto& survivor = results[static_cast<size_t>(1 - victim)];
  EXPECT_EQ(killed.exitCode, 128 + SIGKILL) << killed.output;
  EXPECT_EQ(survivor.exitCode, 0) << survivor.output;
  EXPECT_NE(survivor.output.find("rank " + std::to_string(victim)), std::string::npos) << survivor.output;
  EXPECT_LT(survivor.elapsed, 20s);  // init + 0.3 s + the 3 s deadline, with room for a slow machine
  EXPECT_EQ(segmentsLeftBy(results), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Cases, KilledPeer,
                         ::testing::ValuesIn(killCases()),
                         [](const ::testing::TestParamInfo<KillCase>& param) {
                           return std::string(param.param.transport) + (param.param.victim == 0 ? "SenderDies" : "ReceiverDies");
                         });

}  // namespace
