// loom-train as users run it, as real processes: data parallel training is
// the single-process reference re-partitioned (bitwise with
// LOOM_DETERMINISTIC=1 for 1 to 4 ranks, the parameter count not divisible
// by 3 or 4), the MLP learns Fashion-MNIST, and bad flags are named. Skips
// where Debian's dataset-fashion-mnist is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <set>
#include <string>

#include "tests/support/files.hpp"
#include "tests/support/processes.hpp"

namespace {

using loom::test::runProcess;

bool haveData() { return ::access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) == 0; }

// Every "rank R params_sha256 HEX" line's digest.
std::set<std::string> digests(const std::string& output) {
  std::set<std::string> found;
  const std::regex line("params_sha256 ([0-9a-f]{64})");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    found.insert((*it)[1]);
  }
  return found;
}

bool haveText() { return ::access("/usr/share/dictd/devil.dict.dz", R_OK) == 0; }

// Small enough for a test: the MLP with 2 x 64 hidden units (55050
// parameters, not divisible by 4), the GPT with 2 blocks of 32 channels.
std::vector<std::string> modelFlags(const std::string& model) {
  if (model == "gpt") {
    return {"--model", "gpt", "--steps", "10", "--batch", "12", "--eval", "0", "--layers", "2", "--dim", "32",
            "--heads", "2", "--seq", "16"};
  }
  return {"--model", "mlp", "--steps", "10", "--batch", "60", "--data-limit", "3000", "--eval", "0", "--layers", "2",
          "--dim", "64"};
}

std::vector<std::string> command(const std::string& mode, const std::vector<std::string>& more,
                                  const std::string& model = "mlp") {
  std::vector<std::string> argv{LOOM_TRAIN_BIN, "--mode", mode};
  const auto flags = modelFlags(model);
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

class LoomTrainModels : public ::testing::TestWithParam<std::string> {};

TEST_P(LoomTrainModels, DdpIsBitwiseTheSingleReferenceOnOneToFourRanks) {
  const std::string model = GetParam();
  if (model == "mlp" && !haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (model == "gpt" && !haveText()) GTEST_SKIP() << "dict-devil is not installed";
  for (int n = 1; n <= 4; ++n) {
    const std::string ns = std::to_string(n);
    const auto single = runProcess(command("single", {"--micro-batches", ns}, model));
    ASSERT_EQ(single.exitCode, 0) << single.output;
    const auto ddp = runProcess(command("ddp", {"-N", ns}, model), {{"LOOM_DETERMINISTIC", "1"}});
    ASSERT_EQ(ddp.exitCode, 0) << ddp.output;
    const auto reference = digests(single.output);
    ASSERT_EQ(reference.size(), 1u) << single.output;
    EXPECT_EQ(digests(ddp.output), reference) << n << " ranks:\n" << ddp.output;
    // Every rank printed its digest (and they agree: one digest above).
    for (int r = 0; r < n; ++r) {
      EXPECT_NE(ddp.output.find("rank " + std::to_string(r) + " params_sha256 " + *reference.begin()),
                std::string::npos)
          << ddp.output;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LoomTrainModels, ::testing::Values("mlp", "gpt"));

// The tiny GPT learns the text's characters: the loss falls from about
// ln(vocabulary) and the held-out loss ends well below it.
TEST(LoomTrain, TheGptsLossFalls) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const auto r = runProcess({LOOM_TRAIN_BIN, "--model", "gpt", "--mode", "ddp", "-N", "2", "--steps", "40", "--batch",
                             "8", "--dim", "32", "--layers", "2", "--heads", "2", "--seq", "32", "--lr", "1e-2",
                             "--warmup", "5"},
                            {}, std::chrono::seconds(110));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::regex first("step +1 +loss ([0-9.]+)"), held("held-out loss ([0-9.]+)");
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(r.output, a, first)) << r.output;
  ASSERT_TRUE(std::regex_search(r.output, b, held)) << r.output;
  EXPECT_GT(std::stod(a[1]), 4.0) << r.output;  // ln of about 80 characters: nothing learnt yet
  EXPECT_LT(std::stod(b[1]), 3.0) << r.output;  // character frequencies alone give about 3.3
}

TEST(LoomTrain, WithoutDeterminismTheRanksStillAgreeAndTrackTheReference) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto single = runProcess(command("single", {"--micro-batches", "3"}));
  const auto ddp = runProcess(command("ddp", {"-N", "3"}), {{"LOOM_DETERMINISTIC", "0"}, {"LOOM_ALGO", "ring"}});
  ASSERT_EQ(single.exitCode, 0) << single.output;
  ASSERT_EQ(ddp.exitCode, 0) << ddp.output;  // loom-train fails when the ranks' parameters differ
  const std::regex last("step +10 +loss ([0-9.]+)");
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(single.output, a, last)) << single.output;
  ASSERT_TRUE(std::regex_search(ddp.output, b, last)) << ddp.output;
  // The ring sums in another order: float32 roundings, amplified a little by 10 Adam steps.
  EXPECT_NEAR(std::stod(a[1]), std::stod(b[1]), 1e-3);
}

TEST(LoomTrain, TheMlpLearnsFashionMnist) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string json = ::testing::TempDir() + "loom-train-" + std::to_string(::getpid()) + ".json";
  const auto r = runProcess({LOOM_TRAIN_BIN, "--model", "mlp", "--mode", "ddp", "-N", "2", "--steps", "600",
                             "--batch", "100", "--lr", "2e-3", "--warmup", "20", "--json", json},
                            {}, std::chrono::seconds(110));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::regex accuracy("test accuracy ([0-9.]+)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, accuracy)) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.82) << r.output;  // one epoch; a linear model gets about 0.80
  const std::string record = loom::test::readFile(json);
  EXPECT_NE(record.find("\"params_sha256\": \""), std::string::npos) << record;
  EXPECT_NE(record.find("\"psi\": 203530"), std::string::npos) << record;
  EXPECT_NE(record.find("{\"step\": 600,"), std::string::npos) << record;
  ::unlink(json.c_str());
}

TEST(LoomTrain, BadFlagsAreNamed) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--model", "resnet"}, "--model resnet: not a model (mlp, gpt)"},
      {{"--model", "gpt", "--heads", "3", "--dim", "32"}, "3 heads do not divide 32 channels"},
      {{"--mode", "zero7"}, "--mode zero7: not a mode"},
      {{"--steps", "-3"}, "--steps -3: expected a number"},
      {{"--mode", "single", "-N", "2"}, "-N 2: --mode single runs one rank"},
      {{"--mode", "single", "--batch", "10", "--micro-batches", "3", "--data-limit", "100"},
       "--batch 10 does not split into 3 micro-batches"},
      {{"--frobnicate", "1"}, "--frobnicate: unknown flag"}};
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv{LOOM_TRAIN_BIN};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const auto r = runProcess(argv);
    EXPECT_EQ(r.exitCode, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

}  // namespace
