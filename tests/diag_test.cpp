// loom-diag: its schedule of disjoint pairs, its attribution of slow pairs
// to links, ranks and nodes, and the tool run as processes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/processes.hpp"
#include "tools/loom-diag/attribution.hpp"
#include "tools/loom-diag/schedule.hpp"

namespace loom::diag {
namespace {

TEST(DiagSchedule, EveryPairOnceInDisjointRoundsLinearInTheRanks) {
  for (int n : {2, 3, 4, 5, 8, 13, 64, 257, 1024}) {
    const auto rounds = roundRobin(n);
    EXPECT_EQ(static_cast<int>(rounds.size()), n % 2 == 0 ? n - 1 : n) << n;
    std::set<Pair> seen;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        ASSERT_LT(a, b);
        ASSERT_TRUE(seen.insert({a, b}).second) << n << ": " << a << "-" << b << " twice";
        ASSERT_TRUE(busy.insert(a).second && busy.insert(b).second) << n << ": a rank twice in one round";
        EXPECT_EQ(partnerIn(round, a), b);
        EXPECT_EQ(partnerIn(round, b), a);
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(n) * static_cast<size_t>(n - 1) / 2) << n;
  }
  EXPECT_TRUE(roundRobin(1).empty());
}

// Past --max-pairs: O(log n) rounds of disjoint pairs, every rank against
// several peers on other nodes (nodes of 8 consecutive ranks), for jobs of up
// to 4096 ranks, computed without running anything.
TEST(DiagSchedule, TheSampledScheduleIsSmallAndReachesAcrossNodes) {
  for (int n : {16, 100, 1000, 4096}) {
    const auto rounds = sampledRounds(n, 2, 1);
    EXPECT_LE(static_cast<double>(rounds.size()), 3 * (std::log2(n) + 4)) << n;
    EXPECT_EQ(rounds, sampledRounds(n, 2, 1)) << "every rank must compute the same schedule";
    std::vector<int> acrossNodes(static_cast<size_t>(n));
    std::set<Pair> seen;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        ASSERT_TRUE(busy.insert(a).second && busy.insert(b).second) << n << ": a rank twice in one round";
        ASSERT_TRUE(seen.insert({a, b}).second) << n << ": " << a << "-" << b << " twice";
        if (a / 8 != b / 8) ++acrossNodes[static_cast<size_t>(a)], ++acrossNodes[static_cast<size_t>(b)];
      }
    }
    for (int r = 0; r < n; ++r) EXPECT_GE(acrossNodes[static_cast<size_t>(r)], 4) << n << ": rank " << r;
  }
}

// Every ordered pair of `n` ranks at `normal` GB/s, with a little spread,
// then `slow` applied.
std::vector<PairResult> matrix(int n, double normal, const std::function<double(int, int)>& slow = {}) {
  std::vector<PairResult> pairs;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      double bw = normal * (1 + 0.03 * ((a * 7 + b * 3) % 5 - 2) / 2);  // within ±3 %
      if (slow) bw *= slow(a, b);
      pairs.push_back({.from = a, .to = b, .path = "socket", .bandwidthGBps = bw});
    }
  }
  return pairs;
}

std::vector<int> eachAlone(int n) {
  std::vector<int> hosts;
  for (int r = 0; r < n; ++r) hosts.push_back(r);
  return hosts;
}

TEST(DiagAttribution, AHealthyJobHasNoFinding) {
  const auto pairs = matrix(6, 1.7);
  const auto a = attribute(pairs, eachAlone(6), {});
  EXPECT_TRUE(a.findings.empty()) << a.findings.front().detail;
  ASSERT_EQ(a.paths.size(), 1u);
  EXPECT_EQ(a.paths[0].pairs, 30);
  EXPECT_NEAR(a.paths[0].medianGBps, 1.7, 0.05);
}

TEST(DiagAttribution, OneSlowDirectionIsALinkAndNothingElse) {
  const auto pairs = matrix(4, 1.7, [](int a, int b) { return a == 1 && b == 2 ? 0.1 : 1.0; });
  const auto a = attribute(pairs, eachAlone(4), {});
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, "link");
  EXPECT_EQ(a.findings[0].ranks, (std::vector<int>{1, 2}));
  EXPECT_NEAR(a.findings[0].medianGBps, 1.7, 0.05);
}

TEST(DiagAttribution, ARankWhoseEverySendIsSlowIsTheRank) {
  const auto pairs = matrix(4, 1.7, [](int a, int) { return a == 3 ? 0.2 : 1.0; });
  const auto a = attribute(pairs, eachAlone(4), {});
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, "rank");
  EXPECT_EQ(a.findings[0].ranks, (std::vector<int>{3}));
  EXPECT_NE(a.findings[0].detail.find("sending"), std::string::npos) << a.findings[0].detail;
  const auto receiving = attribute(matrix(4, 1.7, [](int, int b) { return b == 0 ? 0.2 : 1.0; }), eachAlone(4), {});
  ASSERT_EQ(receiving.findings.size(), 1u);
  EXPECT_EQ(receiving.findings[0].ranks, (std::vector<int>{0}));
  EXPECT_NE(receiving.findings[0].detail.find("receiving"), std::string::npos);
}

TEST(DiagAttribution, ANodeWhoseRanksAreAllSlowIsTheNode) {
  // Two nodes of two ranks; node 1's ranks (2, 3) send slowly to everyone.
  const auto pairs = matrix(6, 1.7, [](int a, int) { return a == 2 || a == 3 ? 0.3 : 1.0; });
  const auto a = attribute(pairs, std::vector<int>{0, 0, 2, 2, 4, 5}, {});
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, "node");
  EXPECT_EQ(a.findings[0].ranks, (std::vector<int>{2, 3}));
}

TEST(DiagAttribution, PathsAreHeldOnlyAgainstTheirOwn) {
  // Shared memory within hosts at 8 GB/s, sockets across at 1.5: nothing is slow.
  std::vector<PairResult> pairs;
  const std::vector<int> hosts{0, 0, 2, 2};
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      const bool same = hosts[static_cast<size_t>(a)] == hosts[static_cast<size_t>(b)];
      pairs.push_back({.from = a, .to = b, .path = same ? "shm" : "socket", .bandwidthGBps = same ? 8.0 : 1.5});
    }
  }
  const auto a = attribute(pairs, hosts, {});
  EXPECT_TRUE(a.findings.empty());
  EXPECT_EQ(a.paths.size(), 2u);
}

TEST(DiagAttribution, TheFloorOfAHealthCheckNamesEveryPairBelowIt) {
  const auto pairs = matrix(3, 1.0);
  const auto a = attribute(pairs, eachAlone(3), {.expectPairGBps = 2.0});
  EXPECT_EQ(a.findings.size(), 6u);
  for (const auto& f : a.findings) EXPECT_EQ(f.kind, "floor");
  EXPECT_TRUE(attribute(pairs, eachAlone(3), {.expectPairGBps = 0.5}).findings.empty());
}

TEST(DiagTool, ThreeLocalRanksMeasureEveryPairAndWriteJsonCsvAndAHeatmap) {
  const std::string base = ::testing::TempDir() + "loom-diag-" + std::to_string(::getpid());
  const std::string json = base + ".json", csv = base + ".csv", png = base + ".png", html = base + ".html";
  const auto r = loom::test::runProcesses({{LOOM_DIAG_BIN, "-N", "3", "--size", "256K", "--iters", "2", "--lat-iters",
                                            "20", "--health-size", "64K", "--json", json, "--csv", csv, "--heatmap",
                                            png, "--html", html}},
                                          {{}});
  const auto& out = r[0];
  // 0: nothing found; 1: findings (a noisy shared machine may show one); both ran.
  ASSERT_TRUE(out.exitCode == 0 || out.exitCode == 1) << out.output;
  EXPECT_NE(out.output.find("# findings:"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("one-way bandwidth, GB/s"), std::string::npos) << out.output;
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  EXPECT_NE(doc.find("\"schema\": \"loom-diag\""), std::string::npos) << doc;
  size_t pairs = 0;
  for (size_t at = doc.find("\"from\""); at != std::string::npos; at = doc.find("\"from\"", at + 1)) ++pairs;
  EXPECT_EQ(pairs, 6u) << doc;
  EXPECT_NE(doc.find("\"path\": \"shm\""), std::string::npos) << doc;
  EXPECT_NE(doc.find("\"findings\""), std::string::npos);
  // Collective health: the job and its one node, all-reduce and all-gather at two sizes.
  EXPECT_NE(out.output.find("# collective health"), std::string::npos) << out.output;
  size_t scopes = 0;
  for (size_t at = doc.find("\"scope\""); at != std::string::npos; at = doc.find("\"scope\"", at + 1)) ++scopes;
  EXPECT_EQ(scopes, 8u) << doc;
  EXPECT_NE(doc.find("\"scope\": \"node 0\""), std::string::npos) << doc;
  EXPECT_EQ(doc.find("\"busbw_GBps\": 0,"), std::string::npos) << "every scope measured something: " << doc;

  std::ifstream table(csv);
  std::string line;
  int lines = 0;
  while (std::getline(table, line)) ++lines;
  EXPECT_EQ(lines, 7) << "a header and six pairs";
  // The heatmap: one cell per ordered pair, a PNG on disk.
  EXPECT_NE(out.output.find("# heatmap: 3 x 3 ranks, 6 pairs"), std::string::npos) << out.output;
  std::ifstream picture(png, std::ios::binary);
  char magic[8] = {};
  picture.read(magic, sizeof magic);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  picture.seekg(0, std::ios::end);
  EXPECT_GT(picture.tellg(), 5000) << "a heatmap of three ranks is more than a few bytes";
  // The page: the picture inside it, and the tables.
  std::ifstream page(html);
  std::stringstream pageText;
  pageText << page.rdbuf();
  const std::string body = pageText.str();
  EXPECT_NE(body.find("<img alt='heatmap' src='data:image/png;base64,iVBOR"), std::string::npos);
  EXPECT_NE(body.find("<h2>Pairs</h2><table>"), std::string::npos);
  EXPECT_NE(body.find("<h2>Collective health</h2><table>"), std::string::npos);
  for (const auto& path : {json, csv, png, html}) std::remove(path.c_str());
}

TEST(DiagTool, BadFlagsAreNamed) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--size", "lots"}, {"--iters", "0"}, {"--min-drop", "2"}, {"--threshold", "-1"}, {"-N", "0"}}) {
    const auto r = loom::test::runProcesses({{LOOM_DIAG_BIN, flag, value}}, {{}});
    EXPECT_EQ(r[0].exitCode, 2) << flag;
    EXPECT_NE(r[0].output.find("bad value '" + value + "' for " + flag), std::string::npos) << r[0].output;
  }
  const auto r = loom::test::runProcesses({{LOOM_DIAG_BIN, "--frobnicate", "1"}}, {{}});
  EXPECT_EQ(r[0].exitCode, 2);
  EXPECT_NE(r[0].output.find("unknown flag '--frobnicate'"), std::string::npos) << r[0].output;
}

}  // namespace
}  // namespace loom::diag
