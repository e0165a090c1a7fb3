// loomCommInitFromEnv: each launcher's variables, parsed and then used for real.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

#include "base/error.hpp"
#include "comm/launch_env.hpp"
#include "tests/support/processes.hpp"

using Vars = std::map<std::string, std::string>;

namespace {

constexpr const char* kSecret = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";

loom::LaunchEnv parse(const Vars& vars) {
  return loom::readLaunchEnv([&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string errorOf(const Vars& vars) {
  try {
    parse(vars);
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.code(), loomInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace

TEST(LaunchEnv, EachLauncher) {
  auto loom = parse({{"LOOM_RANK", "1"}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_LOCAL_RANK", "1"}, {"LOOM_STORE_ADDR", "file:///x"}});
  EXPECT_EQ(loom.launcher, "loom");
  EXPECT_EQ(loom.rank, 1);
  EXPECT_EQ(loom.size, 4);
  EXPECT_EQ(loom.localRank, 1);
  EXPECT_EQ(loom.store, "file:///x");

  auto torch = parse({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "3"}, {"MASTER_ADDR", "node1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(torch.launcher, "torchrun");
  EXPECT_EQ(torch.rank, 3);
  EXPECT_EQ(torch.size, 8);
  EXPECT_EQ(torch.store, "node1:29501");  // torchrun's agent holds MASTER_PORT itself

  auto slurm = parse({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"}, {"LOOM_STORE_ADDR", "h:1"}});
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.localRank, 1);

  auto ompi = parse({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                     {"LOOM_STORE_ADDR", "h:1"}});
  EXPECT_EQ(ompi.launcher, "openmpi");
  EXPECT_EQ(ompi.size, 2);

  auto pmi = parse({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"LOOM_STORE_ADDR", "h:1"}});
  EXPECT_EQ(pmi.launcher, "pmi");
  EXPECT_EQ(pmi.rank, 2);
  EXPECT_EQ(pmi.localRank, -1);
}

TEST(LaunchEnv, LoomVariablesWinOverTheLaunchers) {
  auto e = parse({{"LOOM_RANK", "0"}, {"LOOM_WORLD_SIZE", "2"}, {"RANK", "1"}, {"WORLD_SIZE", "2"},
                  {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"LOOM_STORE_ADDR", "h:1"}});
  EXPECT_EQ(e.launcher, "loom");
  EXPECT_EQ(e.rank, 0);
}

TEST(LaunchEnv, ErrorsNameTheVariables) {
  EXPECT_NE(errorOf({}).find("LOOM_RANK"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x'"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}).find("out of range"),
            std::string::npos);
  EXPECT_NE(errorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}).find("LOOM_STORE_ADDR"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT"),
            std::string::npos);
}

// For real: three processes with only one launcher's variables each.
class InitFromLauncher : public ::testing::TestWithParam<std::string> {};

TEST_P(InitFromLauncher, ThreeProcessesRendezvous) {
  const std::string launcher = GetParam();
  const int n = 3;
  int port = loom::test::freePort();
  std::string tcpStore = "127.0.0.1:" + std::to_string(port);
  const std::string fileStore =
      "file://" + ::testing::TempDir() + "loom-launch-" + std::to_string(::getpid()) + "-" + std::to_string(port);
  std::vector<std::vector<std::string>> argvs;
  std::vector<Vars> envs;
  for (int r = 0; r < n; ++r) {
    std::string rs = std::to_string(r), ns = std::to_string(n);
    // Clear any variable of another launcher the test itself runs under.
    Vars v{{"LOOM_RANK", ""}, {"LOOM_WORLD_SIZE", ""}, {"RANK", ""}, {"WORLD_SIZE", ""}, {"SLURM_PROCID", ""},
           {"OMPI_COMM_WORLD_RANK", ""}, {"PMI_RANK", ""}, {"LOOM_STORE_ADDR", ""}, {"MASTER_ADDR", ""}};
    if (launcher == "loom") v.insert_or_assign("LOOM_RANK", rs), v.insert_or_assign("LOOM_WORLD_SIZE", ns),
                            v.insert_or_assign("LOOM_STORE_ADDR", tcpStore);
    if (launcher == "torchrun") v.insert_or_assign("RANK", rs), v.insert_or_assign("WORLD_SIZE", ns),
                                v["LOCAL_RANK"] = rs, v.insert_or_assign("MASTER_ADDR", "127.0.0.1"),
                                v["MASTER_PORT"] = std::to_string(port - 1);
    if (launcher == "slurm") v.insert_or_assign("SLURM_PROCID", rs), v["SLURM_NTASKS"] = ns, v["SLURM_LOCALID"] = rs,
                             v.insert_or_assign("LOOM_STORE_ADDR", tcpStore);
    if (launcher == "openmpi") v.insert_or_assign("OMPI_COMM_WORLD_RANK", rs), v["OMPI_COMM_WORLD_SIZE"] = ns,
                               v.insert_or_assign("LOOM_STORE_ADDR", tcpStore);
    if (launcher == "pmi") v.insert_or_assign("PMI_RANK", rs), v["PMI_SIZE"] = ns,
                           v.insert_or_assign("LOOM_STORE_ADDR", tcpStore);
    if (launcher == "file") v.insert_or_assign("LOOM_RANK", rs), v.insert_or_assign("LOOM_WORLD_SIZE", ns),
                            v.insert_or_assign("LOOM_STORE_ADDR", fileStore);
    v["LOOM_STORE_SECRET"] = kSecret;  // the TCP store admits the job's ranks; the file store ignores it
    argvs.push_back({LOOM_TEST_RANK_BIN, ns});
    envs.push_back(v);
  }
  auto results = loom::test::runProcesses(argvs, envs);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)].exitCode, 0) << launcher << " rank " << r << ": " << results[static_cast<size_t>(r)].output;
    EXPECT_NE(results[static_cast<size_t>(r)].output.find("rank " + std::to_string(r) + " of 3 ok"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Launchers, InitFromLauncher,
                         ::testing::Values("loom", "torchrun", "slurm", "openmpi", "pmi", "file"));

// A process with another LOOM_STORE_SECRET, or none, is refused by rank 0's
// store with a message naming the variable; the job's ranks then fail at
// their (short) deadline instead of handing it the unique id.
TEST(InitFromLauncher, AProcessWithoutTheSecretIsRefused) {
  for (const char* stranger : {"", "00112233445566778899aabbccddeeff"}) {
    const int port = loom::test::freePort();
    std::vector<std::vector<std::string>> argvs;
    std::vector<Vars> envs;
    for (int r = 0; r < 3; ++r) {
      Vars v{{"LOOM_RANK", std::to_string(r)}, {"LOOM_WORLD_SIZE", "3"},
             {"LOOM_STORE_ADDR", "127.0.0.1:" + std::to_string(port)}, {"LOOM_TIMEOUT_MS", "3000"},
             {"LOOM_STORE_SECRET", r == 2 ? stranger : kSecret}};
      argvs.push_back({LOOM_TEST_RANK_BIN, "3"});
      envs.push_back(v);
    }
    auto results = loom::test::runProcesses(argvs, envs);
    EXPECT_NE(results[2].exitCode, 0) << results[2].output;
    EXPECT_NE(results[2].output.find("refused this process: it needs the job's LOOM_STORE_SECRET"), std::string::npos)
        << results[2].output;
    EXPECT_NE(results[0].exitCode, 0) << results[0].output;  // rank 2 never joined
  }
}

TEST(LaunchEnv, StoreSecretIsReadAndCheckedWhateverTheLauncher) {
  auto env = parse({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
                    {"LOOM_STORE_SECRET", kSecret}});
  ASSERT_TRUE(env.storeSecret.has_value());
  EXPECT_EQ(env.storeSecret->toHex(), kSecret);
  EXPECT_FALSE(parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).storeSecret.has_value());
  EXPECT_NE(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOOM_STORE_SECRET", "abc"}}).find("LOOM_STORE_SECRET must be "
                                                                                            "32 hex digits"),
            std::string::npos);
}
