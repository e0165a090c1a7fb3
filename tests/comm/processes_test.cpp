// Bootstrap and barrier with ranks as real processes started by loomrun.
#include <gtest/gtest.h>

#include <cmath>

#include <unistd.h>

#include "tests/support/files.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/text_match.hpp"
#include "tools/loom-perf/fresh_inputs.hpp"

using loom::test::runProcess;

class LoomrunRanks : public ::testing::TestWithParam<int> {};

TEST_P(LoomrunRanks, EveryRankInitializesAndPassesBarriers) {
  const int n = GetParam();
  auto r = runProcess({LOOMRUN_BIN, "-n", std::to_string(n), LOOM_TEST_RANK_BIN, std::to_string(n)});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  for (int rank = 0; rank < n; ++rank) {
    std::string line = "[" + std::to_string(rank) + "] rank " + std::to_string(rank) + " of " + std::to_string(n) +
                       " ok (local " + std::to_string(rank) + " of " + std::to_string(n) + ")";
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing: " << line << "\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, LoomrunRanks, ::testing::Values(1, 2, 3, 4, 8, 16));

TEST(LoomPerf, BarrierSmokeRunReportsEveryRankAndATiming) {
  auto r = runProcess({LOOM_PERF_BIN, "barrier", "-N", "3", "-n", "20", "-w", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(r.output.find("#  rank  " + std::to_string(rank) + "  host"), std::string::npos) << r.output;
  }
  EXPECT_TRUE(loom::test::contains(r.output, "\n +barrier +[0-9.]+ +[0-9.]+\n")) << r.output;
}

TEST(LoomPerf, UnknownCollectiveIsRefused) {
  auto r = runProcess({LOOM_PERF_BIN, "all_reduce_nosuch", "-N", "2"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("unknown collective"), std::string::npos) << r.output;
}

// Every collective as 3 processes, checked, on a few sizes: no wrong element,
// exit 0, and busbw = algbw x nccl-tests' factor on every row.
TEST(LoomPerf, EveryCollectiveRunsCheckedAcrossProcesses) {
  const std::pair<const char*, double> kFactors[] = {
      {"all_reduce", 4.0 / 3}, {"all_gather", 2.0 / 3}, {"reduce_scatter", 2.0 / 3}, {"alltoall", 2.0 / 3},
      {"gather", 2.0 / 3},     {"scatter", 2.0 / 3},    {"broadcast", 1.0},         {"reduce", 1.0},
      {"sendrecv", 1.0}};
  const std::string row("\n +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+  +[0-9.]+ +([0-9.]+) +([0-9.]+) +([0-9]+)"
                       "(?:  +[0-9.]+ +([0-9.]+) +([0-9.]+) +([0-9]+)|  +n/a +n/a +n/a +n/a)");
  for (auto [collective, factor] : kFactors) {
    auto r = runProcess({LOOM_PERF_BIN, collective, "-N", "3", "-b", "96", "-e", "96K", "-f", "32", "-n", "2", "-w",
                         "1", "-r", "2", "-d", "int32", "-o", "max"});
    ASSERT_EQ(r.exitCode, 0) << collective << "\n" << r.output;
    EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
    int rows = 0;
    for (const auto& m : loom::test::searchAll(r.output, row)) {
      ++rows;
      for (int half : {0, 3}) {
        if (!m.matched(1 + half)) continue;  // all-to-all has no in-place half
        const double algbw = std::stod(m[1 + half]);
        const double busbw = std::stod(m[2 + half]);
        EXPECT_NEAR(busbw, algbw * factor, 0.011) << collective << ": " << m.str();  // printed to 0.01
        EXPECT_EQ(m[3 + half], "0") << m.str();
      }
    }
    EXPECT_EQ(rows, 3) << collective << "\n" << r.output;
  }
}

// -d all and -o all: one row per type and op, every one checked.
TEST(LoomPerf, AllTypesAndOpsSweepEveryCombination) {
  auto r = runProcess({LOOM_PERF_BIN, "reduce_scatter", "-N", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "-d",
                       "all", "-o", "all"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
  for (const char* type : {"int8", "uint64", "float16", "bfloat16", "float64"}) {
    for (const char* op : {"sum", "prod", "min", "max", "avg", "premulsum"}) {
      const std::string row = std::string("\n +1024 +[0-9]+ +") + type + " +" + op + " ";
      EXPECT_TRUE(loom::test::contains(r.output, row)) << type << " " << op << "\n" << r.output;
    }
  }
  // A collective without a reduction sweeps the types once each.
  auto g = runProcess({LOOM_PERF_BIN, "all_gather", "-N", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "-d", "all",
                       "-o", "all"});
  ASSERT_EQ(g.exitCode, 0) << g.output;
  EXPECT_EQ(loom::test::searchAll(g.output, "\n +1024 +[0-9]+ +[a-z0-9]+ +none ").size(), 10u);
}

// --json and --csv: every collective's rows, read back from the files. In
// the JSON every half has busbw = algbw x nccl-tests' factor for 3 ranks and
// no wrong element; -I adds per-iteration statistics (min <= p50 <= p99);
// the CSV has a line per half.
TEST(LoomPerf, JsonAndCsvCarryEveryRowWithBusbwFromAlgbw) {
  const std::pair<const char*, double> kFactors[] = {
      {"all_reduce", 4.0 / 3}, {"all_gather", 2.0 / 3}, {"reduce_scatter", 2.0 / 3}, {"alltoall", 2.0 / 3},
      {"gather", 2.0 / 3},     {"scatter", 2.0 / 3},    {"broadcast", 1.0},         {"reduce", 1.0},
      {"sendrecv", 1.0}};
  const std::string dir = ::testing::TempDir();
  const std::string json = dir + "loom-perf-" + std::to_string(::getpid()) + ".json";
  const std::string csv = dir + "loom-perf-" + std::to_string(::getpid()) + ".csv";
  const std::string half(R"("time_us": ([-0-9.e+]+),\s*"algbw_GBps": ([-0-9.e+]+),\s*"busbw_GBps": ([-0-9.e+]+),\s*)"
                        R"("wrong": ([0-9]+),\s*"min_us": ([-0-9.e+]+),\s*"p50_us": ([-0-9.e+]+),\s*"p99_us": ([-0-9.e+]+))");
  for (auto [collective, factor] : kFactors) {
    auto r = runProcess({LOOM_PERF_BIN, collective, "-N", "3", "-b", "96", "-e", "96K", "-f", "32", "-n", "3", "-w",
                         "1", "-I", "1", "-a", "avg", "--json", json, "--csv", csv});
    ASSERT_EQ(r.exitCode, 0) << collective << "\n" << r.output;
    const std::string text = loom::test::readFile(json);
    EXPECT_NE(text.find("\"collective\": \"" + std::string(collective) + "\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"aggregate\": \"avg\""), std::string::npos) << text;
    int halves = 0;
    for (const auto& m : loom::test::searchAll(text, half)) {
      ++halves;
      const double algbw = std::stod(m[2]), busbw = std::stod(m[3]);
      EXPECT_NEAR(busbw, algbw * factor, 1e-5 * busbw + 1e-9) << collective << ": " << m.str();
      EXPECT_EQ(m[4], "0") << m.str();
      const double min = std::stod(m[5]), p50 = std::stod(m[6]), p99 = std::stod(m[7]);
      EXPECT_LE(min, p50);
      EXPECT_LE(p50, p99);
    }
    // 3 sizes, out of place and in place; all-to-all and sendrecv have no in-place half.
    const bool oneHalf = std::string(collective) == "alltoall" || std::string(collective) == "sendrecv";
    const int expected = oneHalf ? 3 : 6;
    EXPECT_EQ(halves, expected) << collective << "\n" << text;
    const std::string lines = loom::test::readFile(csv);
    EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), expected + 1) << lines;
    EXPECT_EQ(lines.rfind("collective,ranks,size_bytes,", 0), 0u) << lines;
  }
  std::remove(json.c_str());
  std::remove(csv.c_str());
}

TEST(LoomPerf, BadFlagsAreNamed) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"-a", "median"}, {"-I", "2"}, {"-F", "2"},
                                               {"-f", "0.5"}, {"-d", "float128"}, {"-b", "lots"}, {"--bogus", "1"}}) {
    std::vector<std::string> argv{LOOM_PERF_BIN, "all_reduce", "-N", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = runProcess(argv);
    EXPECT_EQ(r.exitCode, 2) << args[0] << "\n" << r.output;
    EXPECT_NE(r.output.find(args[0]), std::string::npos) << r.output;
  }
}

// -G 1 puts the buffers on a GPU (scripts/run-gpu-tests runs it there); it
// excludes -R 1 and -F 1 by name, -W 1 needs it, and without a device it
// says so and exits 2.
TEST(LoomPerf, GpuBuffersAreRefusedWhereTheyCannotBe) {
  for (const char* other : {"-R", "-F"}) {
    auto r = runProcess({LOOM_PERF_BIN, "all_reduce", "-N", "2", "-G", "1", other, "1"});
    EXPECT_EQ(r.exitCode, 2) << other << "\n" << r.output;
    EXPECT_NE(r.output.find(other), std::string::npos) << r.output;
  }
  // -W 1 (windows) needs -G 1's buffers and a collective whose buffers are
  // the same size on every rank.
  auto noGpu = runProcess({LOOM_PERF_BIN, "all_reduce", "-N", "2", "-W", "1"});
  EXPECT_EQ(noGpu.exitCode, 2) << noGpu.output;
  EXPECT_NE(noGpu.output.find("-W 1"), std::string::npos) << noGpu.output;
  auto rooted = runProcess({LOOM_PERF_BIN, "broadcast", "-N", "2", "-G", "1", "-W", "1"});
  EXPECT_EQ(rooted.exitCode, 2) << rooted.output;
  EXPECT_NE(rooted.output.find("-W 1 applies to all_reduce"), std::string::npos) << rooted.output;
  auto bad = runProcess({LOOM_PERF_BIN, "all_reduce", "-N", "2", "-G", "2"});
  EXPECT_EQ(bad.exitCode, 2) << bad.output;
  EXPECT_NE(bad.output.find("-G"), std::string::npos) << bad.output;
  // A machine with a GPU runs it checked; one without says so, whichever
  // rank ends first (the launcher ends the others then, so rank 0 must have
  // written why before any rank leaves).
  auto r = runProcess({LOOM_PERF_BIN, "all_reduce", "-N", "2", "-G", "1", "-b", "1K", "-e", "1K"});
  const bool ran = r.exitCode == 0 && r.output.find("buffers from cuda") != std::string::npos;
  const bool refused = r.exitCode == 2 && r.output.find("no CUDA device is visible to rank 0") != std::string::npos;
  EXPECT_TRUE(ran || refused) << r.output;
}

// A root that is no rank is refused by name, with exit status 2, on every
// run: no rank leaves before rank 0 has said why.
TEST(LoomPerf, ARootThatIsNoRankIsRefusedByName) {
  for (int i = 0; i < 5; ++i) {
    auto r = runProcess({LOOM_PERF_BIN, "broadcast", "-N", "3", "-r", "5", "-b", "8", "-e", "8"});
    EXPECT_EQ(r.exitCode, 2) << r.output;
    EXPECT_NE(r.output.find("-r 5 is not a rank (0 to 2)"), std::string::npos) << r.output;
  }
}

// --algo is LOOM_ALGO for the run: the header says so, the tuner's log
// shows the forced choice, and a name that is no algorithm is refused.
TEST(LoomPerf, AlgoFlagSetsTheAlgorithm) {
  auto r = runProcess({LOOM_PERF_BIN, "all_reduce", "-N", "2", "-b", "1K", "-e", "1K", "--algo", "rd"},
                      {{"LOOM_DEBUG", "INFO"}, {"LOOM_DEBUG_SUBSYS", "TUNING"}});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("LOOM_ALGO=rd"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("allreduce of 1024 bytes (size class 2^10) on 2 ranks, 1 nodes: rd, "), std::string::npos)
      << r.output;
  auto bad = runProcess({LOOM_PERF_BIN, "all_reduce", "-N", "2", "--algo", "nosuch"});
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_NE(bad.output.find("'nosuch' is not an algorithm"), std::string::npos) << bad.output;
}

// -F 1 rewrites each rank's input before each timed call: the values stay
// what they were (the rewrite stores each line back), the run still checks
// exact, and the JSON says the inputs were fresh.
TEST(LoomPerf, FreshInputsKeepTheirValuesAndAreRecorded) {
  std::vector<unsigned char> buffer(4099);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<unsigned char>(i * 7 + 3);
  const std::vector<unsigned char> before = buffer;
  loom::perf::rewriteLines(buffer.data() + 1, buffer.size() - 1);
  EXPECT_EQ(buffer, before);

  const std::string json = ::testing::TempDir() + "loom-perf-fresh-" + std::to_string(::getpid()) + ".json";
  auto r = runProcess({LOOM_PERF_BIN, "all_gather", "-N", "2", "-b", "1K", "-e", "64K", "-f", "64", "-n", "3", "-w",
                       "1", "-F", "1", "--json", json});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(loom::test::readFile(json).find("\"fresh_inputs\": true"), std::string::npos) << loom::test::readFile(json);
  std::remove(json.c_str());
}

TEST(LoomPerf, ACorruptedResultIsCountedAndFailsTheRun) {
  auto r = runProcess({LOOM_PERF_BIN, "all_reduce", "-N", "2", "-b", "1K", "-e", "1K", "--test-corrupt-one"});
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_NE(r.output.find("FAILED"), std::string::npos) << r.output;
}

// Buffers from loomMemAlloc in separate processes: each rank maps its peers'
// buffers through /proc/<pid>/fd and the results are still exact. (Heap
// buffers of separate processes are staged: the other LoomPerf tests.) The
// rooted collectives take the last rank as root. Reduce reads in place from
// 3 ranks, where all of them reduce slices; with 2 the root reduces alone and
// stays staged (shm_reduce.cpp).
TEST(LoomPerf, CollectivesOnLoomMemAllocBuffersReadPeersInPlace) {
  for (const std::string collective : {"all_reduce", "broadcast", "reduce"}) {
    for (const std::string n : {"2", "3"}) {
      if (collective == "reduce" && n == "2") continue;
      const std::string root = std::to_string(std::stoi(n) - 1);
      auto r = runProcess({LOOM_PERF_BIN, collective, "-N", n, "-b", "1M", "-e", "4M", "-f", "4", "-n", "2", "-w", "1",
                           "-R", "1", "-d", "int32", "-r", root},
                          {{"LOOM_DEBUG", "INFO"}, {"LOOM_DEBUG_SUBSYS", "COLL"}});
      ASSERT_EQ(r.exitCode, 0) << collective << " on " << n << " ranks\n" << r.output;
      EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << collective << "\n" << r.output;
      EXPECT_NE(r.output.find("buffers in place (loomMemAlloc)"), std::string::npos) << collective << "\n" << r.output;
    }
  }
}

// Heap buffers of separate processes: every collective of several steps is
// staged on every rank alike. (The root of a broadcast once took its own
// buffer for readable by all and read in place while the others staged,
// and the ranks fell out of step.)
TEST(LoomPerf, CollectivesOnHeapBuffersOfSeveralStepsAreStagedByEveryRank) {
  for (const std::string collective : {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter"}) {
    for (const std::string n : {"2", "3"}) {
      auto r = runProcess({LOOM_PERF_BIN, collective, "-N", n, "-b", "1M", "-e", "1M", "-n", "2", "-w", "1", "-d",
                           "int32", "-r", std::to_string(std::stoi(n) - 1)},
                          {{"LOOM_DEBUG", "INFO"}, {"LOOM_DEBUG_SUBSYS", "COLL"}});
      ASSERT_EQ(r.exitCode, 0) << collective << " on " << n << " ranks\n" << r.output;
      EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << collective << "\n" << r.output;
      EXPECT_EQ(r.output.find("buffers in place"), std::string::npos) << collective << "\n" << r.output;
    }
  }
}

TEST(Processes, HostIdOverrideMakesTwoNodes) {
  // Ranks 0-1 claim node "a", ranks 2-3 node "b": local rank and size follow.
  std::string store = "file://" + ::testing::TempDir() + "loom-hostid-store-" + std::to_string(::getpid());
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < 4; ++r) {
    argvs.push_back({LOOM_TEST_RANK_BIN, "4"});
    envs.push_back({{"LOOM_RANK", std::to_string(r)}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_STORE_ADDR", store},
                    {"LOOM_HOSTID", r < 2 ? "a" : "b"}});
  }
  auto results = loom::test::runProcesses(argvs, envs);
  for (int r = 0; r < 4; ++r) {
    const auto& res = results[static_cast<size_t>(r)];
    EXPECT_EQ(res.exitCode, 0) << res.output;
    EXPECT_NE(res.output.find("rank " + std::to_string(r) + " of 4 ok (local " + std::to_string(r % 2) + " of 2)"),
              std::string::npos)
        << res.output;
    // loomCommGetPeerInfo: each peer's node and local rank, and the transport
    // to it (shared memory within a node, sockets across).
    for (int peer = 0; peer < 4; ++peer) {
      const bool same = (peer < 2) == (r < 2);
      const std::string transport = peer == r ? "self" : same ? "shm" : "socket";
      const std::string line = "rank " + std::to_string(r) + " sees peer " + std::to_string(peer) + ": pid ";
      const size_t at = res.output.find(line);
      ASSERT_NE(at, std::string::npos) << res.output;
      const std::string rest = res.output.substr(at, res.output.find('\n', at) - at);
      EXPECT_NE(rest.find(" same host " + std::to_string(same ? 1 : 0) + " local " + std::to_string(peer % 2) +
                          " of 2 transport " + transport),
                std::string::npos)
          << rest;
    }
  }
}
