// loom-train as users run it, as real processes: data parallel training is
// the single-process reference re-partitioned (bitwise with
// LOOM_DETERMINISTIC=1 for 1 to 4 ranks, the parameter count not divisible
// by 3 or 4), the MLP learns Fashion-MNIST, and bad flags are named. Skips
// where Debian's dataset-fashion-mnist is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <cstdio>
#include <vector>

#include "tests/support/files.hpp"
#include "tests/support/llmc_files.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/text_match.hpp"
#include "training/checkpoint.hpp"

namespace {

using loom::test::runProcess;

// The sanitizer builds run a slice (LOOM_TEST_FULL_MATRIX=0): the same code
// paths, fewer repetitions, and no learning-quality or accounting runs,
// which check arithmetic the plain build checks as well.
constexpr bool kFull = LOOM_TEST_FULL_MATRIX;

bool haveData() { return ::access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) == 0; }

// Every "rank R params_sha256 HEX" line's digest.
std::set<std::string> digests(const std::string& output) {
  std::set<std::string> found;
  for (const auto& m : loom::test::searchAll(output, "params_sha256 ([0-9a-f]{64})")) found.insert(m[1]);
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

// (model, precision)
class LoomTrainModels : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// In bf16 too: single sums its micro-batches' bf16 gradients in float32 and
// rounds once, as Loom's bf16 all-reduce and reduce-scatter do.
TEST_P(LoomTrainModels, DdpAndZeroAreBitwiseTheSingleReferenceOnOneToFourRanks) {
  const auto [model, precision] = GetParam();
  if (model == "mlp" && !haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (model == "gpt" && !haveText()) GTEST_SKIP() << "dict-devil is not installed";
  for (int n = kFull ? 1 : 3; n <= (kFull ? 4 : 3); ++n) {
    const std::string ns = std::to_string(n);
    const auto single = runProcess(command("single", {"--micro-batches", ns, "--precision", precision}, model));
    ASSERT_EQ(single.exitCode, 0) << single.output;
    const auto reference = digests(single.output);
    ASSERT_EQ(reference.size(), 1u) << single.output;
    for (const char* mode : {"ddp", "zero1", "zero2", "zero3"}) {
      // Small units, so that ZeRO's shards cut layers and pad (55050 parameters over 4 ranks).
      const auto run = runProcess(
          command(mode, {"-N", ns, "--bucket-kb", "16", "--first-bucket-kb", "16", "--precision", precision}, model),
          {{"LOOM_DETERMINISTIC", "1"}});
      ASSERT_EQ(run.exitCode, 0) << mode << ": " << run.output;
      EXPECT_EQ(digests(run.output), reference) << mode << " on " << n << " ranks:\n" << run.output;
      // Every rank printed its digest (and they agree: one digest above).
      for (int r = 0; r < n; ++r) {
        EXPECT_NE(run.output.find("rank " + std::to_string(r) + " params_sha256 " + *reference.begin()),
                  std::string::npos)
            << mode << ": " << run.output;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LoomTrainModels,
                         ::testing::Combine(::testing::Values("mlp", "gpt"), ::testing::Values("fp32", "bf16")),
                         [](const auto& test) { return std::get<0>(test.param) + "_" + std::get<1>(test.param); });

// Pipeline parallelism re-partitions single too: for 2, 3 and 4 stages,
// every schedule, both models, the same micro-batches give the same bits.
// Four blocks, so that interleaving has two chunks per rank on 4 ranks, and
// a batch that 4, 6 and 8 micro-batches divide.
class LoomTrainPipeline : public ::testing::TestWithParam<std::string> {};

TEST_P(LoomTrainPipeline, EverySchedulesParametersAreBitwiseTheSingleReference) {
  const std::string model = GetParam();
  if (model == "mlp" && !haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (model == "gpt" && !haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::vector<std::string> shape{"--layers", "4", "--batch", model == "gpt" ? "24" : "48"};
  for (int p = kFull ? 2 : 3; p <= (kFull ? 4 : 3); ++p) {
    const std::string m = std::to_string(2 * p);
    auto flags = shape;
    flags.insert(flags.end(), {"--micro-batches", m});
    const auto single = runProcess(command("single", flags, model));
    ASSERT_EQ(single.exitCode, 0) << single.output;
    const auto reference = digests(single.output);
    ASSERT_EQ(reference.size(), 1u) << single.output;
    for (const char* schedule : {"gpipe", "1f1b", "interleaved", "zb-h1"}) {
      auto more = flags;
      more.insert(more.end(), {"-N", std::to_string(p), "--schedule", schedule, "--chunks",
                               std::string(schedule) == "interleaved" ? "2" : "1"});
      const auto run = runProcess(command("pp", more, model), {{"LOOM_DETERMINISTIC", "1"}});
      ASSERT_EQ(run.exitCode, 0) << schedule << ": " << run.output;
      EXPECT_EQ(digests(run.output), reference) << schedule << " on " << p << " stages:\n" << run.output;
      for (int r = 0; r < p; ++r) {
        EXPECT_NE(run.output.find("rank " + std::to_string(r) + " params_sha256 " + *reference.begin()),
                  std::string::npos)
            << schedule << ": " << run.output;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LoomTrainPipeline, ::testing::Values("mlp", "gpt"));

// In bf16 too: each chunk's layers compute in a float32 window over bf16
// parameters, as the model's do, and a stage sums its micro-batches in
// float32 and rounds once, as single does; so a pipeline is single's bit
// for bit in bf16 as well (with the GPT's head tied, too).
TEST(LoomTrain, PipelinesAreBitwiseTheSingleReferenceInBf16) {
  if (!haveData() || !haveText()) GTEST_SKIP() << "dataset-fashion-mnist or dict-devil is not installed";
  for (const std::string model : {"mlp", "gpt"}) {
    for (const bool tie : model == "gpt" ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      std::vector<std::string> flags{"--precision", "bf16", "--micro-batches", "4", "--layers", "4", "--batch",
                                     model == "gpt" ? "24" : "48"};
      if (tie) flags.insert(flags.end(), {"--tie", "1"});
      const auto single = runProcess(command("single", flags, model));
      ASSERT_EQ(single.exitCode, 0) << single.output;
      for (const std::vector<std::string>& pipeline :
           {std::vector<std::string>{"-N", "2", "--schedule", "1f1b"},
            std::vector<std::string>{"-N", "2", "--schedule", "interleaved", "--chunks", "2"},
            std::vector<std::string>{"-N", "2", "--schedule", "zb-h1"}}) {
        auto more = flags;
        more.insert(more.end(), pipeline.begin(), pipeline.end());
        const auto run = runProcess(command("pp", more, model));
        ASSERT_EQ(run.exitCode, 0) << run.output;
        EXPECT_EQ(digests(run.output), digests(single.output)) << model << " " << pipeline[3] << " tie " << tie;
      }
    }
  }
}

// Where the stages are cut changes nothing of the arithmetic: balanced by
// parameters, by each layer's measured time (rank 0's figures, broadcast),
// or as --stages lists them, the parameters are single's. loom-train prints
// the cut, and every layer is in exactly one chunk.
TEST(LoomTrain, EveryCutOfThePipelineIsBitwiseTheSingleReference) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::vector<std::string> shape{"--layers", "4", "--micro-batches", "4"};  // 9 layers
  const auto single = runProcess(command("single", shape));
  ASSERT_EQ(single.exitCode, 0) << single.output;
  const std::vector<std::vector<std::string>> cuts{{"--balance", "params"}, {"--balance", "time"}, {"--stages", "1,1,7"}};
  for (const auto& cut : cuts) {
    auto flags = shape;
    flags.insert(flags.end(), {"-N", "3"});
    flags.insert(flags.end(), cut.begin(), cut.end());
    const auto run = runProcess(command("pp", flags));
    ASSERT_EQ(run.exitCode, 0) << run.output;
    EXPECT_EQ(digests(run.output), digests(single.output)) << cut[1] << ":\n" << run.output;
    const auto m = loom::test::search(run.output, "chunks of layers 0-([0-9]+) ([0-9]+)-([0-9]+) ([0-9]+)-8\n");
    ASSERT_TRUE(m) << run.output;
    EXPECT_EQ(std::stoi((*m)[2]), std::stoi((*m)[1]) + 1) << run.output;
    EXPECT_EQ(std::stoi((*m)[4]), std::stoi((*m)[3]) + 1) << run.output;
    if (cut[0] == "--stages") {
      EXPECT_NE(run.output.find("chunks of layers 0-0 1-1 2-8"), std::string::npos) << run.output;
    }
  }
}

// The GPT with its head tied to its token embedding (GPT-2's): both copies
// get the sum of their gradients (across the first and the last stage in a
// pipeline, over a communicator of the two), the norm counts them once, and
// they never drift apart (loom-train exits 1 if they do). Bitwise single's
// in ddp (one micro-batch a rank, deterministic) and in every pipeline
// schedule; tensor parallel and the mesh within 1e-5 of its loss.
TEST(LoomTrain, TiedEmbeddingsStayOneAndMatchTheSingleReference) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::vector<std::string> tied{"--tie", "1", "--layers", "4", "--batch", "16", "--heads", "4"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), tied.begin(), tied.end());
    return more;
  };
  const auto single4 = runProcess(command("single", with({"--micro-batches", "4"}), "gpt"));
  ASSERT_EQ(single4.exitCode, 0) << single4.output;
  const auto untied = runProcess(command("single", {"--layers", "4", "--batch", "16", "--heads", "4", "--micro-batches", "4"}, "gpt"));
  ASSERT_EQ(untied.exitCode, 0) << untied.output;
  EXPECT_NE(digests(single4.output), digests(untied.output));  // tying changes the model
  const std::vector<std::vector<std::string>> pipelines{
      {"-N", "2", "--schedule", "1f1b"}, {"-N", "3", "--schedule", "gpipe"},
      {"-N", "2", "--schedule", "interleaved", "--chunks", "2"}, {"-N", "3", "--schedule", "zb-h1"}};
  for (const auto& p : pipelines) {
    auto flags = with({"--micro-batches", "4"});
    flags.insert(flags.end(), p.begin(), p.end());
    const auto run = runProcess(command("pp", flags, "gpt"));
    ASSERT_EQ(run.exitCode, 0) << run.output;
    EXPECT_EQ(digests(run.output), digests(single4.output)) << p[1] << " " << p[3] << ":\n" << run.output;
  }
  const auto single2 = runProcess(command("single", with({"--micro-batches", "2"}), "gpt"));
  const auto ddp = runProcess(command("ddp", with({"-N", "2"}), "gpt"), {{"LOOM_DETERMINISTIC", "1"}});
  ASSERT_EQ(ddp.exitCode, 0) << ddp.output;
  EXPECT_EQ(digests(ddp.output), digests(single2.output)) << ddp.output;
  const auto mesh = runProcess(command("3d", with({"--dp", "2", "--pp", "2", "--tp", "2", "--micro-batches", "4"}), "gpt"));
  ASSERT_EQ(mesh.exitCode, 0) << mesh.output;
  const std::string loss = "step +([0-9]+) +loss ([0-9.]+)";
  std::vector<double> a, b;
  for (const auto& m : loom::test::searchAll(single4.output, loss)) a.push_back(std::stod(m[2]));
  for (const auto& m : loom::test::searchAll(mesh.output, loss)) b.push_back(std::stod(m[2]));
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), 10u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * a[i] + 1e-6) << "step " << i + 1;  // printed to 6 places
}

size_t jsonNumber(const std::string& json, const std::string& key) {
  const auto m = loom::test::search(json, "\"" + key + "\": ([0-9]+)");
  if (!m) {
    ADD_FAILURE() << "no " << key << " in " << json;
    return 0;
  }
  return std::stoull((*m)[1]);
}

// Model-state bytes per rank against ZeRO's accounting. Per parameter, e
// bytes of parameters and e of gradients (fp32: e = 4; bf16: e = 2) and
// the optimizer's state: fp32 AdamW's 8 bytes of moments, bf16's 12 (fp32
// master weights and moments); ZeRO in fp32 keeps its shard's fp32 master
// parameters as optimizer state (stages 1, 2) or as the parameters (3).
// With Psi parameters on N ranks and s = Psi/N:
//   ddp    params e Psi, grads e Psi, optimizer 8 Psi (fp32) or 12 Psi (bf16)
//   zero1  params e Psi, grads e Psi + e s (the reduced shard, apart), optimizer 12 s
//   zero2  params e Psi, grads e s + staging, optimizer 12 s
//   zero3  params e s + staging (fp32: + its 4 s master), grads e s + staging,
//          optimizer 8 s (fp32) or 12 s (bf16)
// where staging is at most two units in flight, and every shard is padded
// up to N equal blocks per unit. In bf16, ddp is ZeRO's 16 Psi and zero3
// its 16 Psi / N but for the staging; zero1 holds e s more than ZeRO's
// 4 Psi + 12 Psi / N, which reduces into its gradient buffer in place.
class LoomTrainMemory : public ::testing::TestWithParam<std::string> {};

TEST_P(LoomTrainMemory, ModelStateBytesFollowZerosFormulas) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  if (!kFull) GTEST_SKIP() << "the plain build checks the accounting";
  const std::string precision = GetParam();
  const bool bf16 = precision == "bf16";
  const double e = bf16 ? 2 : 4;
  for (int n : {2, 4}) {
    for (const char* mode : {"ddp", "zero1", "zero2", "zero3"}) {
      const std::string json = ::testing::TempDir() + "loom-train-mem-" + std::to_string(::getpid()) + ".json";
      const auto r = runProcess({LOOM_TRAIN_BIN, "--model", "gpt", "--mode", mode, "-N", std::to_string(n),
                                 "--steps", "2", "--batch", "8", "--eval", "0", "--dim", "128", "--bucket-kb", "64",
                                 "--first-bucket-kb", "64", "--precision", precision, "--json", json});
      ASSERT_EQ(r.exitCode, 0) << r.output;
      const std::string record = loom::test::readFile(json);
      ::unlink(json.c_str());
      const double psi = static_cast<double>(jsonNumber(record, "psi"));
      const double shard = psi / n;
      const double params = static_cast<double>(jsonNumber(record, "parameters"));
      const double grads = static_cast<double>(jsonNumber(record, "gradients"));
      const double optimizer = static_cast<double>(jsonNumber(record, "optimizer_state"));
      // Two units in flight: units are whole layers, and the largest, an MLP
      // branch of dim 128 (layer norm 2C, fc 4C^2 + 4C, projection 4C^2 + C),
      // outgrows the 64 KiB cap on its own; plus a pad of up to N - 1 elements each.
      const double largestUnit = e * (8 * 128 * 128 + 7 * 128);
      const double staging = 2 * (largestUnit + e * n);
      SCOPED_TRACE(std::string(mode) + " on " + std::to_string(n) + " ranks, " + precision + ": " + record);
      const auto within = [](double got, double want) { return got >= want * 0.999 && got <= want * 1.05; };
      if (std::string(mode) == "ddp") {
        EXPECT_TRUE(within(params, e * psi) && within(grads, e * psi) && within(optimizer, (bf16 ? 12 : 8) * psi));
        if (bf16) {
          EXPECT_TRUE(within(params + grads + optimizer, 16 * psi));  // ZeRO's DDP baseline
        }
      } else if (std::string(mode) == "zero1") {
        EXPECT_TRUE(within(params, e * psi) && within(grads, e * psi + e * shard) && within(optimizer, 12 * shard));
      } else if (std::string(mode) == "zero2") {
        EXPECT_TRUE(within(params, e * psi) && within(optimizer, 12 * shard));
        EXPECT_GE(grads, e * shard);
        EXPECT_LE(grads, e * shard + staging);
      } else {
        const double ownParams = bf16 ? 2 * shard : 4 * shard;  // fp32: the master shard is the parameters
        EXPECT_TRUE(within(optimizer, (bf16 ? 12 : 8) * shard));
        EXPECT_GE(params, ownParams);
        EXPECT_LE(params, ownParams + staging);
        EXPECT_GE(grads, e * shard);
        EXPECT_LE(grads, e * shard + staging);
        if (bf16) {
          EXPECT_LE(params + grads + optimizer, 16 * shard + 2 * staging);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, LoomTrainMemory, ::testing::Values("fp32", "bf16"));

// bf16 trains as fp32 does: each step's loss within 1 % of fp32's over 20
// steps of the tiny GPT. bf16 keeps 8 bits of mantissa (a relative rounding
// of 2^-9, 0.2 %) on every parameter and gradient, and the loss averages
// over thousands of them: measured 0.005-0.015 % apart.
TEST(LoomTrain, Bf16TracksFp32) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const auto losses = [](const std::string& precision) {
    const auto r = runProcess({LOOM_TRAIN_BIN, "--model", "gpt", "--mode", "ddp", "-N", "2", "--steps", "20",
                               "--batch", "12", "--eval", "0", "--layers", "2", "--dim", "32", "--heads", "2", "--seq",
                               "16", "--precision", precision});
    EXPECT_EQ(r.exitCode, 0) << r.output;
    EXPECT_NE(r.output.find(" in " + precision + " on 2 ranks"), std::string::npos) << r.output;
    std::vector<double> out;
    for (const auto& m : loom::test::searchAll(r.output, "step +[0-9]+ +loss ([0-9.]+)")) out.push_back(std::stod(m[1]));
    return out;
  };
  const auto fp32 = losses("fp32"), bf16 = losses("bf16");
  ASSERT_EQ(fp32.size(), 20u);
  ASSERT_EQ(bf16.size(), 20u);
  for (size_t i = 0; i < fp32.size(); ++i) EXPECT_NEAR(bf16[i], fp32[i], 0.01 * fp32[i]) << "step " << i + 1;
  EXPECT_LT(bf16.back(), bf16.front());
}

// The tiny GPT learns the text's characters: the loss falls from about
// ln(vocabulary) and the held-out loss ends well below it.
TEST(LoomTrain, TheGptsLossFalls) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const auto r = runProcess({LOOM_TRAIN_BIN, "--model", "gpt", "--mode", "ddp", "-N", "2", "--steps", "40", "--batch",
                             "8", "--dim", "32", "--layers", "2", "--heads", "2", "--seq", "32", "--lr", "1e-2",
                             "--warmup", "5"},
                            {}, std::chrono::seconds(110));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const auto a = loom::test::search(r.output, "step +1 +loss ([0-9.]+)");
  const auto b = loom::test::search(r.output, "held-out loss ([0-9.]+)");
  ASSERT_TRUE(a) << r.output;
  ASSERT_TRUE(b) << r.output;
  EXPECT_GT(std::stod((*a)[1]), 4.0) << r.output;  // ln of about 80 characters: nothing learnt yet
  EXPECT_LT(std::stod((*b)[1]), 3.0) << r.output;  // character frequencies alone give about 3.3
}

// An llm.c token file (GPT-2's uint16 format) of `tokens` tokens: words of
// three fixed tokens each, 40 words drawn by `seed`, among 300 ids past 1000.
void writeWordsTokenFile(const std::string& path, size_t tokens, uint32_t seed) {
  std::vector<uint32_t> ids;
  uint32_t state = seed;
  while (ids.size() < tokens) {
    state = state * 1664525u + 1013904223u;
    const uint32_t word = (state >> 16) % 40;  // 40 words, each three fixed tokens
    for (uint32_t k = 0; k < 3 && ids.size() < tokens; ++k) ids.push_back(1000 + (word * 7 + k * 101) % 300);
  }
  loom::test::writeLlmcTokenFile(path, ids, 20240520, 1, 2);
}

// An llm.c token file (GPT-2's uint16 format), written here: a text of 40
// words of 3 tokens among 300 ids past 1000 (a vocabulary of 1300, given),
// so that the ids are not bytes. The GPT learns it (the loss falls well below
// the unigram's), its
// held-out file is measured and sampled as ids, and ddp on 2 ranks is
// bitwise single.
TEST(LoomTrain, TrainsOnAnLlmcTokenFile) {
  const std::string stem = ::testing::TempDir() + "loom-train-words-" + std::to_string(::getpid());
  const std::string train = stem + "_train.bin";
  const std::string val = stem + "_val.bin";
  writeWordsTokenFile(train, 30000, 1);
  writeWordsTokenFile(val, 3000, 2);
  const std::vector<std::string> flags{"--model", "gpt", "--data", train, "--data-val", val, "--vocab", "1300", "--steps", "150",
                                       "--batch", "8", "--dim", "32", "--layers", "2", "--heads", "2", "--seq", "24",
                                       "--lr", "1e-2", "--warmup", "5", "--eval-every", "150", "--sample", "150"};
  std::vector<std::string> single{LOOM_TRAIN_BIN, "--mode", "single", "--micro-batches", "2"};
  single.insert(single.end(), flags.begin(), flags.end());
  const auto one = runProcess(single, {{"LOOM_DETERMINISTIC", "1"}}, std::chrono::seconds(110));
  ASSERT_EQ(one.exitCode, 0) << one.output;
  EXPECT_NE(one.output.find("linear(32x1300)"), std::string::npos) << "the vocabulary: --vocab's\n" << one.output;
  const auto first = loom::test::search(one.output, "step +1 +loss ([0-9.]+)");
  const auto held = loom::test::search(one.output, "step +150 +held-out loss ([0-9.]+)");
  ASSERT_TRUE(first) << one.output;
  ASSERT_TRUE(held) << one.output;
  EXPECT_GT(std::stod((*first)[1]), 6.0) << one.output;  // ln 1300 = 7.2: nothing learnt yet
  // A word's first token is one of 40 (ln 40 = 3.7), its other two are certain: 1.2 once learnt.
  EXPECT_LT(std::stod((*held)[1]), 3.0) << one.output;
  EXPECT_TRUE(loom::test::contains(one.output, "step +150 +sample \"(1[0-2][0-9][0-9] )+ \\| (1[0-2][0-9][0-9] )+\""))
      << one.output;
  std::vector<std::string> ddp{LOOM_TRAIN_BIN, "--mode", "ddp", "-N", "2"};
  ddp.insert(ddp.end(), flags.begin(), flags.end());
  const auto two = runProcess(ddp, {{"LOOM_DETERMINISTIC", "1"}}, std::chrono::seconds(110));
  ASSERT_EQ(two.exitCode, 0) << two.output;
  EXPECT_EQ(digests(two.output), digests(one.output)) << two.output;
  EXPECT_EQ(digests(one.output).size(), 1u) << one.output;
  // A file that is not there is named (a failure of the run, not of its flags).
  std::vector<std::string> missing{LOOM_TRAIN_BIN, "--model", "gpt", "--data", stem + "_missing.bin"};
  const auto none = runProcess(missing);
  EXPECT_NE(none.exitCode, 0);
  EXPECT_NE(none.output.find(stem + "_missing.bin: cannot open"), std::string::npos) << none.output;
  std::remove(train.c_str());
  std::remove(val.c_str());
}

// With llm.c's tokenizer (--tokenizer, its gpt2_tokenizer.bin format; here
// one of 1300 tokens, token i the text "t<i> "), the samples of a token file
// are text: the prompt's words and the generated ones, each id its bytes. A
// tokenizer that is not there is named.
TEST(LoomTrain, SamplesATokenFileAsTextByItsTokenizer) {
  const std::string stem = ::testing::TempDir() + "loom-train-tokenizer-" + std::to_string(::getpid());
  const std::string tokens = stem + "_train.bin";
  const std::string tokenizer = stem + "_tokenizer.bin";
  writeWordsTokenFile(tokens, 3000, 3);
  std::vector<std::string> texts;
  for (int id = 0; id < 1300; ++id) texts.push_back("t" + std::to_string(id) + " ");
  loom::test::writeLlmcTokenizer(tokenizer, texts, 20240328, 2, 1299);
  const auto run = [&](const std::string& tokenizerFile) {
    return runProcess({LOOM_TRAIN_BIN, "--model", "gpt", "--data", tokens, "--vocab", "1300", "--tokenizer", tokenizerFile,
                       "--steps", "2", "--batch", "4", "--dim", "16", "--layers", "1", "--heads", "2", "--seq", "16",
                       "--sample", "2", "--eval", "0"},
                      {}, std::chrono::seconds(110));
  };
  const auto r = run(tokenizer);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  // The prompt: the held-out words' tokens (ids 1000-1299); then whatever the barely trained model draws.
  EXPECT_TRUE(loom::test::contains(r.output, "step +2 +sample \"(t1[0-2][0-9][0-9] )+ \\| (t[0-9]+ )+\""))
      << r.output;
  const auto missing = run(stem + "_missing.bin");
  EXPECT_NE(missing.exitCode, 0);
  EXPECT_NE(missing.output.find(stem + "_missing.bin: cannot open"), std::string::npos) << missing.output;
  std::remove(tokens.c_str());
  std::remove(tokenizer.c_str());
}

// Without LOOM_DETERMINISTIC (rings sum in another order), and with two
// micro-batches per rank (accumulated before the ranks' sum, or, in ZeRO,
// after it), every mode still leaves all ranks with the same parameters
// (loom-train compares them and fails otherwise) and stays near the reference.
TEST(LoomTrain, WithoutDeterminismTheRanksStillAgreeAndTrackTheReference) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto single = runProcess(command("single", {"--micro-batches", "6"}));
  ASSERT_EQ(single.exitCode, 0) << single.output;
  const std::string last = "step +10 +loss ([0-9.]+)";
  const auto a = loom::test::search(single.output, last);
  ASSERT_TRUE(a) << single.output;
  for (const char* mode : {"ddp", "zero1", "zero2", "zero3"}) {
    const auto run = runProcess(command(mode, {"-N", "3", "--micro-batches", "6"}),
                                {{"LOOM_DETERMINISTIC", "0"}, {"LOOM_ALGO", "ring"}});
    ASSERT_EQ(run.exitCode, 0) << mode << ": " << run.output;
    const auto b = loom::test::search(run.output, last);
    ASSERT_TRUE(b) << run.output;
    // float32 roundings in other orders, amplified a little by 10 Adam steps.
    EXPECT_NEAR(std::stod((*a)[1]), std::stod((*b)[1]), 1e-3) << mode;
  }
}

TEST(LoomTrain, TheMlpLearnsFashionMnist) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!kFull) GTEST_SKIP() << "the plain build checks what the MLP learns";
  const std::string json = ::testing::TempDir() + "loom-train-" + std::to_string(::getpid()) + ".json";
  const auto r = runProcess({LOOM_TRAIN_BIN, "--model", "mlp", "--mode", "ddp", "-N", "2", "--steps", "600",
                             "--batch", "100", "--lr", "2e-3", "--warmup", "20", "--json", json},
                            {}, std::chrono::seconds(110));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const auto m = loom::test::search(r.output, "test accuracy ([0-9.]+)");
  ASSERT_TRUE(m) << r.output;
  EXPECT_GT(std::stod((*m)[1]), 0.82) << r.output;  // one epoch; a linear model gets about 0.80
  const std::string record = loom::test::readFile(json);
  EXPECT_NE(record.find("\"params_sha256\": \""), std::string::npos) << record;
  EXPECT_NE(record.find("\"psi\": 203530"), std::string::npos) << record;
  EXPECT_NE(record.find("\"step\": 600,"), std::string::npos) << record;
  ::unlink(json.c_str());
}

std::string freshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "loom-train-" + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

// Five steps, a checkpoint, a new job that resumes and runs five more: the
// same parameters, bit for bit, as ten steps straight, in every mode.
TEST(LoomTrain, ResumingFromACheckpointIsBitwiseTheStraightRun) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::vector<std::string> modes =
      kFull ? std::vector<std::string>{"single", "ddp", "zero1", "zero2", "zero3", "pp", "3d", "ddp/bf16",
                                       "zero1/bf16", "zero3/bf16", "pp/bf16", "3d/bf16"}
            : std::vector<std::string>{"ddp", "zero3", "pp", "zero2/bf16"};
  for (const std::string& entry : modes) {
    // Every mode in fp32; the master weights' modes again in bf16.
    const bool bf16 = entry.ends_with("/bf16");
    const std::string mode = bf16 ? entry.substr(0, entry.size() - 5) : entry;
    std::vector<std::string> ranks =
        mode == "single" ? std::vector<std::string>{} : std::vector<std::string>{"-N", "3"};
    // 3d: three replicas with ZeRO-1's optimizer parts (the MLP has no tensor-parallel twin).
    if (mode == "3d") ranks = {"--dp", "3", "--pp", "1", "--tp", "1", "--data-parallel", "zero1"};
    if (bf16) ranks.insert(ranks.end(), {"--precision", "bf16"});
    const auto straight = runProcess(command(mode, ranks));
    ASSERT_EQ(straight.exitCode, 0) << straight.output;
    const std::string dir = freshDir("resume");
    auto flags = ranks;
    flags.insert(flags.end(), {"--checkpoint", dir, "--stop-after", "5"});
    const auto first = runProcess(command(mode, flags));
    ASSERT_EQ(first.exitCode, 0) << first.output;
    EXPECT_EQ(first.output.find("step    6 "), std::string::npos) << first.output;
    flags = ranks;
    flags.insert(flags.end(), {"--checkpoint", dir, "--resume", "1"});
    const auto second = runProcess(command(mode, flags));
    ASSERT_EQ(second.exitCode, 0) << second.output;
    EXPECT_NE(second.output.find("resumed from " + dir + " after step 5"), std::string::npos) << second.output;
    EXPECT_EQ(second.output.find("step    5 "), std::string::npos) << second.output;
    EXPECT_EQ(digests(second.output), digests(straight.output)) << mode << ":\n" << second.output;
    std::filesystem::remove_all(dir);
  }
}

// A checkpoint is refused when a flag it must match differs (the model, the
// data, the schedule, the optimizer), naming it, and when a part was
// altered, naming the part; another mode or rank count is accepted.
TEST(LoomTrain, ResumeRefusesAnotherConfigurationOrAnAlteredFile) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = freshDir("refuse");
  const auto first = runProcess(command("zero2", {"-N", "2", "--checkpoint", dir, "--stop-after", "2"}));
  ASSERT_EQ(first.exitCode, 0) << first.output;
  const auto other = runProcess(command("zero3", {"-N", "2", "--seed", "2", "--checkpoint", dir, "--resume", "1"}));
  EXPECT_EQ(other.exitCode, 2) << other.output;
  EXPECT_NE(other.output.find("--resume: the checkpoint in " + dir + " was written with --seed 1, not 2"),
            std::string::npos)
      << other.output;
  const auto empty = runProcess(command("ddp", {"-N", "2", "--resume-from", dir + "/none"}));
  EXPECT_EQ(empty.exitCode, 2) << empty.output;
  EXPECT_NE(empty.output.find("--resume: no checkpoint in " + dir + "/none"), std::string::npos) << empty.output;
  {
    std::fstream f(dir + "/step-00000002/part-1.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  const auto altered = runProcess(command("zero3", {"-N", "2", "--checkpoint", dir, "--resume", "1"}));
  EXPECT_NE(altered.exitCode, 0) << altered.output;
  EXPECT_NE(altered.output.find(dir + "/step-00000002/part-1.bin: its SHA-256 does not match"), std::string::npos)
      << altered.output;
  std::filesystem::remove_all(dir);
}

// How the resharding matrix lays the tiny GPT out. Those of one class are
// bitwise one another (one micro-batch a data-parallel rank, pipelines
// summing theirs in order, LOOM_DETERMINISTIC=1): class 2 is single's with
// 2 micro-batches, class 4 single's with 4; tensor parallelism reorders its
// partial sums, a class of its own.
struct Layout {
  std::string name;
  std::vector<std::string> flags;
  int klass;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all{
      {"single", {"--mode", "single", "--micro-batches", "2"}, 2},
      {"ddp2", {"--mode", "ddp", "-N", "2", "--micro-batches", "2"}, 2},
      {"zero1x2", {"--mode", "zero1", "-N", "2", "--micro-batches", "2"}, 2},
      {"zero3x2", {"--mode", "zero3", "-N", "2", "--micro-batches", "2"}, 2},
      {"zero3x4", {"--mode", "zero3", "-N", "4", "--micro-batches", "4"}, 4},
      {"pp2", {"--mode", "pp", "-N", "2", "--micro-batches", "2"}, 2},
      {"tp2", {"--mode", "tp", "-N", "2", "--micro-batches", "1"}, 1},
      {"3d221", {"--mode", "3d", "-N", "4", "--dp", "2", "--pp", "2", "--tp", "1", "--micro-batches", "2"}, 2}};
  return all;
}

const Layout& layoutNamed(const std::string& name) {
  for (const Layout& l : layouts()) {
    if (l.name == name) return l;
  }
  throw std::invalid_argument(name);
}

// The tiny GPT, 6 steps, laid out as `layout`, with `more`.
std::vector<std::string> gptCommand(const Layout& layout, const std::vector<std::string>& more) {
  std::vector<std::string> argv{LOOM_TRAIN_BIN, "--model", "gpt", "--steps", "6", "--batch", "12", "--eval", "0",
                                "--layers", "2", "--dim", "32", "--heads", "2", "--seq", "16"};
  argv.insert(argv.end(), layout.flags.begin(), layout.flags.end());
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

// The rank-0 parameter digest a run printed, after it exited 0.
std::string digestOf(const loom::test::ProcessResult& run, const std::string& what) {
  EXPECT_EQ(run.exitCode, 0) << what << ":\n" << run.output;
  const auto found = digests(run.output);
  EXPECT_EQ(found.size(), 1u) << what << ":\n" << run.output;
  return found.empty() ? what + ": no digest" : *found.begin();
}

// Every component of a checkpoint's state, in the dense model's order.
std::vector<float> denseState(const std::string& dir, uint64_t& optimizerSteps) {
  const loom::train::CheckpointReader reader(dir, {});
  optimizerSteps = reader.info().optimizerSteps;
  std::vector<float> all(reader.info().params * reader.info().components);
  for (size_t c = 0; c < reader.info().components; ++c) {
    reader.read(c, 0, std::span(all).subspan(c * reader.info().params, reader.info().params));
  }
  return all;
}

// Checkpoints reshard (issue 45): written under one layout after 3 of 6
// steps, read under every other with nothing left to run, each reader
// prints the writer's parameters and writes the checkpoint again in its
// own layout, and that checkpoint holds the same state (parameters,
// moments, step count) bit for bit. Then a layout of the writer's class
// resumes and ends with its class's uninterrupted parameters, and the
// tensor-parallel writer resumes from a checkpoint resharded through single
// and ends with its own uninterrupted run's.
class LoomTrainReshard : public ::testing::TestWithParam<std::string> {};

TEST_P(LoomTrainReshard, EveryLayoutReadsItAndWritesItBackBitwise) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const Layout& writer = layoutNamed(GetParam());
  const std::map<std::string, std::string> env{{"LOOM_DETERMINISTIC", "1"}};
  const std::string dir = freshDir("reshard-" + writer.name);
  const std::string written = digestOf(
      runProcess(gptCommand(writer, {"--checkpoint", dir, "--stop-after", "3"}), env), writer.name + " writes");
  uint64_t steps = 0;
  const std::vector<float> state = denseState(dir, steps);
  EXPECT_EQ(steps, 3u);
  const std::vector<std::string> readers =
      kFull ? std::vector<std::string>{"single", "ddp2", "zero1x2", "zero3x4", "pp2", "tp2", "3d221"}
            : std::vector<std::string>{"single", "zero3x4", "tp2"};
  for (const std::string& name : readers) {
    if (name == writer.name) continue;
    const std::string again = dir + "-" + name;
    const auto read = runProcess(
        gptCommand(layoutNamed(name), {"--resume-from", dir, "--stop-after", "3", "--checkpoint", again}), env);
    EXPECT_EQ(digestOf(read, name + " reads " + writer.name), written) << read.output;
    EXPECT_NE(read.output.find("(written by --mode " + writer.flags[1]), std::string::npos) << read.output;
    uint64_t againSteps = 0;
    const std::vector<float> rewritten = denseState(again, againSteps);
    EXPECT_EQ(againSteps, steps) << name;
    ASSERT_EQ(rewritten.size(), state.size()) << name;
    EXPECT_EQ(std::memcmp(rewritten.data(), state.data(), state.size() * sizeof(float)), 0)
        << name << " rewrote " << writer.name << "'s state with other bits";
    if (name != "single" || writer.name != "tp2") std::filesystem::remove_all(again);
  }
  // The continuation, against an uninterrupted run.
  std::string resumer = writer.name, from = dir, straight = writer.name;
  std::vector<std::string> more;
  if (writer.klass == 2) {  // the next of the class resumes; single is its reference
    const std::vector<std::string> mates{"single", "ddp2", "zero1x2", "pp2", "3d221"};
    const auto at = std::find(mates.begin(), mates.end(), writer.name);
    resumer = mates[static_cast<size_t>(at - mates.begin() + 1) % mates.size()];
    straight = "single";
  } else if (writer.klass == 4) {  // single with 4 micro-batches resumes
    resumer = "single";
    more = {"--micro-batches", "4"};
  } else {  // through single's layout and back
    from = dir + "-single";
  }
  more.insert(more.end(), {"--resume-from", from});
  const auto resumed = runProcess(gptCommand(layoutNamed(resumer), more), env);
  const auto reference = runProcess(gptCommand(layoutNamed(straight), {}), env);
  EXPECT_EQ(digestOf(resumed, resumer + " resumes " + writer.name), digestOf(reference, straight + " straight"))
      << resumed.output;
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(dir + "-single");
}

INSTANTIATE_TEST_SUITE_P(Writers, LoomTrainReshard,
                         ::testing::Values("single", "ddp2", "zero1x2", "zero3x4", "pp2", "tp2", "3d221"));

// The whole of every match of `pattern` in `text`.
std::vector<std::string> lines(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  for (const auto& m : loom::test::searchAll(text, pattern)) out.push_back(m.str());
  return out;
}

constexpr const char* kLoss = "step +([0-9]+)  held-out loss ([0-9.]+)";
constexpr const char* kText = "step +([0-9]+)  sample \"([^\n]*)\"\n";

// --eval-every and --sample run on the dense parameters between steps in
// every mode: zero3 (shards) and pp (stages) print the held-out losses and
// the text single prints, exactly (one micro-batch a rank,
// LOOM_DETERMINISTIC=1), tp its losses within 1e-5; --json carries them,
// and every step's MFU against the measured peak.
TEST(LoomTrain, HeldOutLossSamplesAndMfuBetweenSteps) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::map<std::string, std::string> env{{"LOOM_DETERMINISTIC", "1"}};
  const auto probes = [&](const std::string& name, const std::string& json) {
    // tp with two micro-batches as well: single's sums, but for its partial products.
    const auto run = runProcess(gptCommand(layoutNamed(name), {"--micro-batches", "2", "--eval-every", "3", "--sample",
                                                               "3", "--sample-seed", "4", "--json", json}),
                                env);
    EXPECT_EQ(run.exitCode, 0) << run.output;
    return run.output;
  };
  const std::string json = ::testing::TempDir() + "loom-train-probes-" + std::to_string(::getpid()) + ".json";
  const std::string single = probes("single", json);
  const auto losses = loom::test::searchAll(single, kLoss);
  const auto texts = loom::test::searchAll(single, kText);
  ASSERT_EQ(losses.size(), 2u) << single;  // after steps 3 and 6
  ASSERT_EQ(texts.size(), 2u) << single;
  EXPECT_EQ(losses[1][1], "6");
  EXPECT_NE(texts[0][2], texts[1][2]) << single;  // other parameters, another step's seed
  const std::string record = loom::test::readFile(json);
  std::filesystem::remove(json);
  EXPECT_EQ(loom::test::searchAll(record, "\"held_out_loss\": [0-9]").size(), 2u) << record;  // the final one is -1 (--eval 0)
  EXPECT_EQ(loom::test::searchAll(record, "\"sample\": \"").size(), 3u) << record;  // and the final record's
  const auto mfu = loom::test::searchAll(record, "\"mfu\": ([0-9.e+-]+)");
  ASSERT_EQ(mfu.size(), 6u) << record;
  for (const auto& m : mfu) EXPECT_TRUE(std::stod(m[1]) > 0 && std::stod(m[1]) < 1.5) << m[0];
  const auto peak = loom::test::search(record, "\"peak_flops\": ([0-9.e+]+)");
  ASSERT_TRUE(peak) << record;
  EXPECT_GT(std::stod((*peak)[1]), 1e8);
  for (const std::string name : {"zero3x2", "pp2"}) {
    const std::string out = probes(name, json);
    EXPECT_EQ(lines(out, kLoss), lines(single, kLoss)) << out;
    EXPECT_EQ(lines(out, kText), lines(single, kText)) << out;
  }
  const std::string tp = probes("tp2", json);
  const auto tpLosses = loom::test::searchAll(tp, kLoss);
  ASSERT_EQ(tpLosses.size(), 2u) << tp;
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(std::stod(tpLosses[i][2]), std::stod(losses[i][2]), 1e-5 * std::stod(losses[i][2]));
  std::filesystem::remove(json);
}

// The spans of a --timeline trace (writeChromeTrace), by rank, in the
// trace's order: each event's name, category, start and end in
// microseconds, and chunk (-1 where it has none, as idle spans).
struct TraceSpan {
  std::string name, cat;
  double start, end;
  int chunk;
};
std::map<int, std::vector<TraceSpan>> traceSpans(const std::string& text) {
  std::map<int, std::vector<TraceSpan>> out;
  for (const auto& m : loom::test::searchAll(
           text, "\\{\"name\": \"([a-z]+[ 0-9]*)\", \"cat\": \"([a-z]+)\", \"ph\": \"X\", \"pid\": 0, "
                 "\"tid\": ([0-9]+), \"ts\": ([0-9.]+), \"dur\": ([0-9.]+)(, \"args\": \\{\"micro_batch\": "
                 "-?[0-9]+, \"chunk\": (-?[0-9]+))?")) {
    const double start = std::stod(m[4]);
    out[std::stoi(m[3])].push_back({m[1], m[2], start, start + std::stod(m[5]), m[7].empty() ? -1 : std::stoi(m[7])});
  }
  return out;
}

// ZeRO-1 and 2 overlap the parameter all-gathers after a step with the next
// step's forward, by the trainer's order and not by timing: in the
// --timeline of every rank, every unit's gather for step k + 1 was launched
// before step k + 1's first forward began (after step k's), and some unit's
// was waited for only once that forward was running (each waits at its
// first layer). Small units (16 KiB) make several of them.
TEST(LoomTrain, ZerosParameterGathersOverlapTheNextForward) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  for (const std::string mode : {"zero1", "zero2"}) {
    const std::string trace = ::testing::TempDir() + "loom-train-overlap-" + std::to_string(::getpid()) + ".json";
    const auto run = runProcess(gptCommand(layoutNamed("zero1x2"), {"--mode", mode, "--bucket-kb", "16", "--first-bucket-kb",
                                                                   "16", "--timeline", trace}));
    ASSERT_EQ(run.exitCode, 0) << run.output;
    const std::string text = loom::test::readFile(trace);
    std::filesystem::remove(trace);
    std::map<int, std::vector<TraceSpan>> forwards, gathers;  // by rank
    for (const auto& [rank, spans] : traceSpans(text)) {
      for (const TraceSpan& span : spans) {
        if (span.name == "gather") gathers[rank].push_back(span);
        if (span.name == "forward 0") forwards[rank].push_back(span);
      }
    }
    ASSERT_EQ(forwards.size(), 2u) << text;
    for (auto& [rank, steps] : forwards) {
      ASSERT_EQ(steps.size(), 6u) << mode << " rank " << rank;  // one first micro-batch a step
      size_t units = 0;
      for (size_t k = 1; k < steps.size(); ++k) {
        size_t launched = 0, waitedInside = 0;
        for (const TraceSpan& g : gathers[rank]) {
          if (g.start <= steps[k - 1].start || g.start >= steps[k].start) continue;
          ++launched;
          if (g.end > steps[k].start) ++waitedInside;
        }
        if (k == 1) units = launched;
        EXPECT_EQ(launched, units) << mode << " rank " << rank << " step " << k + 1;
        EXPECT_GE(waitedInside, 1u) << mode << " rank " << rank << " step " << k + 1;
      }
      EXPECT_GE(units, 3u) << mode << " rank " << rank << ": " << text;
    }
  }
}

// ZeRO-3 gathers every unit before its forward and again before its
// backward, but for the forward's last unit, which the backward starts with
// at once: it is kept, as FSDP keeps it. In the --timeline of every rank,
// each step gathers U units for the forward and U - 1 for the backward.
TEST(LoomTrain, Zero3KeepsTheForwardsLastUnitForTheBackward) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::string trace = ::testing::TempDir() + "loom-train-zero3-" + std::to_string(::getpid()) + ".json";
  const auto run = runProcess({LOOM_TRAIN_BIN, "--model", "gpt", "--mode", "zero3", "-N", "2", "--steps", "4", "--batch",
                               "8", "--eval", "0", "--layers", "2", "--dim", "32", "--heads", "4", "--seq", "16",
                               "--timeline", trace});
  ASSERT_EQ(run.exitCode, 0) << run.output;
  const std::string text = loom::test::readFile(trace);
  std::filesystem::remove(trace);
  const auto byRank = traceSpans(text);
  ASSERT_EQ(byRank.size(), 2u) << text;
  for (const auto& [rank, spans] : byRank) {
    std::vector<TraceSpan> events;
    for (const TraceSpan& span : spans) {
      if (span.cat == "gather" || span.cat == "optimizer") events.push_back(span);
    }
    std::sort(events.begin(), events.end(), [](const TraceSpan& a, const TraceSpan& b) { return a.start < b.start; });
    std::vector<size_t> perStep{0};
    std::set<int> units;
    for (const TraceSpan& span : events) {
      if (span.cat == "optimizer") {
        perStep.push_back(0);
        continue;
      }
      ++perStep.back();
      units.insert(span.chunk);
    }
    perStep.pop_back();  // after the last step's optimizer
    ASSERT_EQ(perStep.size(), 4u) << "rank " << rank;
    EXPECT_EQ(units.size(), 7u) << "rank " << rank;  // embedding, 2 x 2 residual branches, final norm, head
    for (size_t k = 0; k < perStep.size(); ++k) {
      EXPECT_EQ(perStep[k], 2 * units.size() - 1) << "rank " << rank << " step " << k + 1;
    }
  }
}

// The mesh's data-parallel replicas reduce their gradients during the
// backward, by the trainer's order and not by timing: in the --timeline of
// every rank, each step's reductions (ddp's all-reduces, ZeRO-1's reduces to
// the owners of each part; 16 KiB buckets make several) were launched
// while one of that step's backwards (or, under ZB-H1, W's) was running,
// and waited for after.
TEST(LoomTrain, TheMeshsReplicasReduceDuringTheBackward) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--data-parallel", "ddp"}, std::vector<std::string>{"--data-parallel", "zero1"},
        std::vector<std::string>{"--data-parallel", "zero1", "--schedule", "zb-h1"}}) {
    const std::string trace = ::testing::TempDir() + "loom-train-reduce-" + std::to_string(::getpid()) + ".json";
    std::vector<std::string> argv{LOOM_TRAIN_BIN, "--model", "gpt", "--steps", "4", "--batch", "16", "--eval", "0",
                                  "--layers", "2", "--dim", "32", "--heads", "4", "--seq", "16", "--micro-batches",
                                  "4", "--mode", "3d", "--dp", "2", "--pp", "2", "--tp", "1", "--bucket-kb", "16",
                                  "--first-bucket-kb", "16", "--timeline", trace};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const auto run = runProcess(argv);
    ASSERT_EQ(run.exitCode, 0) << run.output;
    const std::string text = loom::test::readFile(trace);
    std::filesystem::remove(trace);
    std::map<int, std::vector<TraceSpan>> backwards, reduces;  // by rank
    for (const auto& [rank, spans] : traceSpans(text)) {
      for (const TraceSpan& span : spans) {
        if (span.cat == "reduce") reduces[rank].push_back(span);
        if (span.cat == "backward" || span.cat == "weights") backwards[rank].push_back(span);
      }
    }
    ASSERT_EQ(reduces.size(), 4u) << text;
    for (const auto& [rank, spans] : reduces) {
      EXPECT_EQ(spans.size(), 4u) << flags[1] << " rank " << rank;  // one a step
      for (const TraceSpan& r : spans) {
        const bool during = std::any_of(backwards[rank].begin(), backwards[rank].end(),
                                        [&](const TraceSpan& b) { return b.start < r.start && r.start < b.end; });
        EXPECT_TRUE(during) << flags[1] << " rank " << rank << ": reduce launched at " << r.start
                            << " us outside every backward";
      }
    }
  }
}

// Every mode with collectives reports, each step, the time from its first
// collective's launch to its last one's end and the part of it the rank
// waited for: more than nothing, and never more than the whole. (A
// pipeline's blocked receives are its bubble, reported apart.)
TEST(LoomTrain, EveryModeReportsItsExposedCommunication) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::string json = ::testing::TempDir() + "loom-train-exposed-" + std::to_string(::getpid()) + ".json";
  for (const std::string name : {"ddp2", "zero1x2", "zero3x2", "tp2", "3d221"}) {
    const auto run = runProcess(gptCommand(layoutNamed(name), {"--json", json}));
    ASSERT_EQ(run.exitCode, 0) << run.output;
    const std::string record = loom::test::readFile(json);
    const auto steps = loom::test::searchAll(
        record, "\"comm_seconds\": ([0-9.e+-]+),\\s*\"exposed_comm_seconds\": ([0-9.e+-]+)");
    ASSERT_EQ(steps.size(), 6u) << name << ": " << record;
    for (const auto& s : steps) {
      const double comm = std::stod(s[1]), exposed = std::stod(s[2]);
      EXPECT_GT(comm, 0) << name << ": " << s[0];
      EXPECT_GE(exposed, 0) << name << ": " << s[0];
      EXPECT_LE(exposed, comm * 1.0001) << name << ": " << s[0];
    }
  }
  std::filesystem::remove(json);
}

// --recompute 1 leaves every mode's parameters the same bits
// (LOOM_DETERMINISTIC=1) and lowers the lead's activation peak.
TEST(LoomTrain, RecomputeKeepsTheBitsAndLowersTheActivationPeak) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::map<std::string, std::string> env{{"LOOM_DETERMINISTIC", "1"}};
  const std::string json = ::testing::TempDir() + "loom-train-recompute-" + std::to_string(::getpid()) + ".json";
  const auto run = [&](const std::string& name, const std::string& recompute, double& peak) {
    const auto out = runProcess(gptCommand(layoutNamed(name), {"--recompute", recompute, "--json", json}), env);
    const auto bytes = loom::test::search(loom::test::readFile(json), "\"activations\": ([0-9]+)");
    peak = bytes ? std::stod((*bytes)[1]) : 0;
    return digestOf(out, name + " --recompute " + recompute);
  };
  const std::vector<std::string> names =
      kFull ? std::vector<std::string>{"single", "ddp2", "zero3x2", "pp2", "tp2", "3d221"}
            : std::vector<std::string>{"single", "zero3x2", "tp2"};
  for (const std::string& name : names) {
    double kept = 0, recomputed = 0;
    EXPECT_EQ(run(name, "1", recomputed), run(name, "0", kept)) << name;
    EXPECT_GT(kept, 0) << name;
    EXPECT_LT(recomputed, kept) << name;
  }
  std::filesystem::remove(json);
}

// Three ranks as processes of their own (no launcher to end the job): one
// is killed mid-training; the other two stop with an error naming it, in
// about a second, not at their deadline; a new job resumes from the last
// checkpoint and ends with the parameters of a run that was never stopped.
TEST(LoomTrain, AKilledRankStopsTheOthersAndTheJobResumes) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = freshDir("killed");
  // Steps enough that the kill lands mid-run (rank 0 prints step 10 while the
  // others still have most of theirs); the sanitizers, ten times slower a
  // step, need fewer for that, and 400 cost them 30 s.
  const std::string steps = kFull ? "400" : "100";
  const auto job = [&](bool resume, const std::optional<loom::test::KillRule>& kill) {
    const int port = loom::test::freePort();
    std::vector<std::vector<std::string>> argvs;
    std::vector<std::map<std::string, std::string>> envs;
    for (int r = 0; r < 3; ++r) {
      argvs.push_back(command("ddp", {"--steps", steps, "--checkpoint", dir, "--checkpoint-every", "4", "--resume",
                                      resume ? "1" : "0"}));
      envs.push_back({{"LOOM_RANK", std::to_string(r)}, {"LOOM_WORLD_SIZE", "3"},
                      {"LOOM_STORE_ADDR", "127.0.0.1:" + std::to_string(port)},
                      {"LOOM_STORE_SECRET", "00112233445566778899aabbccddeeff"}, {"LOOM_DETERMINISTIC", "1"},
                      {"LOOM_TIMEOUT_MS", "60000"}, {"LOOM_HEARTBEAT_MS", "200"}, {"RANK", ""}, {"SLURM_PROCID", ""},
                      {"OMPI_COMM_WORLD_RANK", ""}, {"PMI_RANK", ""}});
    }
    return loom::test::runProcesses(argvs, envs, std::chrono::seconds(100), kill);
  };
  // Rank 1 dies once rank 0 has printed step 10 (a checkpoint was taken after step 8).
  auto killed = job(false, loom::test::KillRule{1, 0, "step   10 "});
  ASSERT_EQ(killed[1].exitCode, 128 + SIGKILL) << killed[1].output << "\nrank 0:\n" << killed[0].output;
  for (int r : {0, 2}) {
    const auto& out = killed[static_cast<size_t>(r)];
    EXPECT_EQ(out.exitCode, 1) << out.output;
    // The watchdog's notice ("rank 1 failed: ...") or the node segment's own
    // look at the process ("rank 1 (pid P) exited before step S"), whichever
    // comes first: both name it.
    EXPECT_TRUE(loom::test::contains(out.output, "rank 1 (failed|\\(pid [0-9]+\\) exited)")) << out.output;
    EXPECT_GE(out.afterKill.count(), 0) << "rank " << r << " ended before the kill: " << out.output;
    EXPECT_LT(out.afterKill, std::chrono::seconds(10)) << out.output;  // not the 60 s deadline
  }
  auto resumed = job(true, std::nullopt);
  for (const auto& out : resumed) ASSERT_EQ(out.exitCode, 0) << out.output;
  EXPECT_NE(resumed[0].output.find("resumed from " + dir + " after step"), std::string::npos) << resumed[0].output;
  std::filesystem::remove_all(dir);
  const auto straight = runProcess(command("single", {"--steps", steps, "--micro-batches", "3"}));
  ASSERT_EQ(straight.exitCode, 0) << straight.output;
  EXPECT_EQ(digests(resumed[0].output), digests(straight.output)) << resumed[0].output;
}

// Each step's loss in a --json record.
std::vector<double> losses(const std::string& json) {
  std::vector<double> out;
  for (const auto& m : loom::test::searchAll(json, "\"loss\": ([-0-9.e+]+)")) out.push_back(std::stod(m[1]));
  return out;
}

// Tensor parallelism (2 and 4 ranks, with and without sequence
// parallelism) and the 3-D mesh (2 x 2 x 2: 8 processes) train the tiny
// GPT as single does: every step's loss within 1e-5 relative (the tensor
// ranks' partial sums reorder sums of up to 4 x 32 float32 terms, at most
// 2 x 128 x 2^-24 = 1.5e-5 of their magnitude, and the loss averages over
// thousands of them: measured 1e-8 apart), and every rank (every data-
// parallel replica) ends with the same parameters (loom-train exits 1 otherwise).
TEST(LoomTrain, TensorParallelAndThe3DMeshTrackTheSingleReference) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::string dir = freshDir("mesh");
  std::filesystem::create_directories(dir);
  const std::vector<std::string> gpt{"--model", "gpt", "--steps", "10", "--batch", "16", "--eval", "0", "--layers",
                                     "2", "--dim", "32", "--heads", "4", "--seq", "16", "--micro-batches", "4"};
  const auto run = [&](const std::vector<std::string>& mode, const std::string& name) {
    std::vector<std::string> argv{LOOM_TRAIN_BIN};
    argv.insert(argv.end(), mode.begin(), mode.end());
    argv.insert(argv.end(), gpt.begin(), gpt.end());
    argv.insert(argv.end(), {"--json", dir + "/" + name + ".json"});
    const auto r = runProcess(argv, {}, std::chrono::seconds(100));
    EXPECT_EQ(r.exitCode, 0) << name << ": " << r.output;
    const std::set<std::string> d = digests(r.output);
    EXPECT_EQ(d.size(), 1u) << name << ": " << r.output;
    return losses(loom::test::readFile(dir + "/" + name + ".json"));
  };
  const auto reference = run({"--mode", "single"}, "single");
  ASSERT_EQ(reference.size(), 10u);
  std::vector<std::pair<std::vector<std::string>, std::string>> meshes{
      {{"--mode", "tp", "-N", "2"}, "tp2"},
      {{"--mode", "3d", "--dp", "2", "--pp", "2", "--tp", "2"}, "3d"}};
  if (kFull) {
    meshes.push_back({{"--mode", "tp", "-N", "4", "--sequence-parallel", "1"}, "tp4-sequence"});
    meshes.push_back({{"--mode", "3d", "--dp", "2", "--pp", "2", "--tp", "2", "--sequence-parallel", "1"}, "3d-sequence"});
    meshes.push_back({{"--mode", "3d", "--dp", "1", "--pp", "2", "--tp", "2", "--schedule", "interleaved", "--chunks",
                       "2"},
                      "3d-interleaved"});
  }
  for (const auto& [mode, name] : meshes) {
    const auto got = run(mode, name);
    ASSERT_EQ(got.size(), reference.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], reference[i], 1e-5 * reference[i]) << name << " step " << i + 1;
  }
  // In bf16 each data-parallel replica rounds its micro-batches' sum to
  // bf16 before the replicas add theirs (single rounds once): 2^-9 of a
  // gradient, measured 2e-5 of the loss after 10 steps; held to 1e-3.
  const auto bf16 = run({"--mode", "single", "--precision", "bf16"}, "single-bf16");
  for (const auto& [mode, name] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--mode", "tp", "-N", "2", "--precision", "bf16"}, "tp2-bf16"},
           {{"--mode", "3d", "--dp", "2", "--pp", "2", "--tp", "2", "--precision", "bf16", "--data-parallel", "zero1"},
            "3d-bf16"}}) {
    const auto got = run(mode, name);
    ASSERT_EQ(got.size(), bf16.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], bf16[i], 1e-3 * bf16[i]) << name << " step " << i + 1;
  }
  std::filesystem::remove_all(dir);
}

// ZB-H1 only moves each micro-batch's weight gradients later: on the mesh,
// with tensor and sequence parallelism (whose layers split their backward
// around their collectives) and data-parallel replicas, in fp32 and bf16,
// its parameters are 1F1B's bit for bit (deterministic reductions).
TEST(LoomTrain, ZeroBubbleIsBitwise1F1BOnTheMesh) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::vector<std::string> gpt{"--model", "gpt", "--steps", "6", "--batch", "16", "--eval", "0", "--layers", "2",
                                     "--dim", "32", "--heads", "4", "--seq", "16", "--micro-batches", "4"};
  const auto run = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv{LOOM_TRAIN_BIN};
    argv.insert(argv.end(), gpt.begin(), gpt.end());
    argv.insert(argv.end(), flags.begin(), flags.end());
    const auto r = runProcess(argv, {{"LOOM_DETERMINISTIC", "1"}}, std::chrono::seconds(100));
    EXPECT_EQ(r.exitCode, 0) << r.output;
    const auto d = digests(r.output);
    EXPECT_EQ(d.size(), 1u) << r.output;
    return d;
  };
  const std::vector<std::vector<std::string>> meshes{
      {"--mode", "3d", "--dp", "1", "--pp", "2", "--tp", "2", "--sequence-parallel", "1"},
      {"--mode", "3d", "--dp", "2", "--pp", "2", "--tp", "1", "--precision", "bf16", "--tie", "1"}};
  for (const auto& mesh : meshes) {
    auto oneF = mesh, zb = mesh;
    oneF.insert(oneF.end(), {"--schedule", "1f1b"});
    zb.insert(zb.end(), {"--schedule", "zb-h1"});
    const auto expected = run(oneF);
    std::string named;
    for (const auto& flag : mesh) named += flag + " ";
    EXPECT_EQ(run(zb), expected) << named;
  }
}

// ZeRO-1 on the mesh's data-parallel axis: the replicas reduce-scatter
// their gradients, each steps its half of every chunk's optimizer and
// all-gathers, so the parameters are ddp's bit for bit (deterministic
// reductions) and single's with one micro-batch a replica, while each rank
// keeps half the optimizer state.
TEST(LoomTrain, TheMeshsZero1IsItsDdpBitwiseWithHalfTheOptimizer) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::string dir = freshDir("mesh-zero1");
  std::filesystem::create_directories(dir);
  const std::vector<std::string> gpt{"--model", "gpt", "--steps", "10", "--batch", "16", "--eval", "0", "--layers",
                                     "2", "--dim", "32", "--heads", "4", "--seq", "16"};
  const auto run = [&](std::vector<std::string> flags, const std::string& json) {
    std::vector<std::string> argv{LOOM_TRAIN_BIN};
    argv.insert(argv.end(), gpt.begin(), gpt.end());
    argv.insert(argv.end(), flags.begin(), flags.end());
    if (!json.empty()) argv.insert(argv.end(), {"--json", dir + "/" + json});
    const auto r = runProcess(argv, {{"LOOM_DETERMINISTIC", "1"}}, std::chrono::seconds(100));
    EXPECT_EQ(r.exitCode, 0) << r.output;
    return digests(r.output);
  };
  const auto single = run({"--mode", "single", "--micro-batches", "2"}, "");
  for (const char* dp : {"ddp", "zero1"}) {
    EXPECT_EQ(run({"--mode", "3d", "--dp", "2", "--pp", "1", "--tp", "1", "--micro-batches", "2", "--data-parallel", dp}, ""),
              single)
        << dp;
  }
  const auto ddp = run({"--mode", "3d", "--dp", "2", "--pp", "2", "--tp", "1", "--micro-batches", "4"}, "ddp.json");
  const auto zero1 =
      run({"--mode", "3d", "--dp", "2", "--pp", "2", "--tp", "1", "--micro-batches", "4", "--data-parallel", "zero1"},
          "zero1.json");
  EXPECT_EQ(ddp, zero1);
  const auto optimizer = [&](const std::string& json) { return jsonNumber(loom::test::readFile(dir + "/" + json), "optimizer_state"); };
  EXPECT_NEAR(static_cast<double>(optimizer("zero1.json")), optimizer("ddp.json") / 2.0, optimizer("ddp.json") * 0.01);
  std::filesystem::remove_all(dir);
}

// Every number in the JSON array `key` holds.
std::vector<double> jsonArray(const std::string& json, const std::string& key) {
  std::vector<double> out;
  const auto m = loom::test::search(json, "\"" + key + "\": \\[([^\\]]*)\\]");
  if (!m) {
    ADD_FAILURE() << "no " << key << " in " << json;
    return out;
  }
  for (const auto& number : loom::test::searchAll((*m)[1], "[-0-9.e+]+")) out.push_back(std::stod(number.str()));
  return out;
}

// What pp reports: each stage's idle share and bytes sent per step (all on
// the pipeline axis), its activation peak (GPipe's first stage holds all m = 8 micro-batches,
// 1F1B's at most 2: a quarter; ZB-H1's 2 too, with each layer's dL/dy kept
// for its W), and a Chrome trace with a track per rank of forward,
// backward, send, receive, optimizer and idle (and ZB-H1's weights).
TEST(LoomTrain, PipelineReportsBubbleActivationsAndATimeline) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const std::string dir = freshDir("pipeline-report");
  std::filesystem::create_directories(dir);
  std::map<std::string, std::string> json;
  for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
    const auto run = runProcess(command("pp", {"-N", "2", "--schedule", schedule, "--micro-batches", "8", "--batch",
                                               "24", "--json", dir + "/" + schedule + ".json", "--timeline",
                                               dir + "/" + schedule + ".trace.json"},
                                        "gpt"));
    ASSERT_EQ(run.exitCode, 0) << run.output;
    EXPECT_TRUE(loom::test::contains(run.output,
                                     "bubble +[0-9]+%  sent dp 0.00 pp [0-9.]+ tp 0.00 MB  activations <= [0-9.]+ MB"))
        << run.output;
    json[schedule] = loom::test::readFile(dir + "/" + schedule + ".json");
  }
  for (const auto& [schedule, record] : json) {
    const auto idle = jsonArray(record, "rank_idle");
    const auto sent = jsonArray(record, "pp");  // the first step's rank_sent_bytes
    ASSERT_EQ(idle.size(), 2u) << record;
    ASSERT_EQ(sent.size(), 2u) << record;
    for (double share : idle) {
      EXPECT_GE(share, 0.0);
      EXPECT_LT(share, 1.0);
    }
    // Stage 0 sends 8 activations and stage 1 8 gradients of 24/8 x 16 rows x 32 floats.
    EXPECT_EQ(sent[0], 8.0 * 3 * 16 * 32 * 4) << record;
    EXPECT_EQ(sent[1], 8.0 * 3 * 16 * 32 * 4) << record;
  }
  const auto final = [&](const std::string& schedule) { return json[schedule].substr(json[schedule].find("\"final\"")); };
  const auto gpipe = jsonArray(final("gpipe"), "rank_activation_peak_bytes");
  const auto oneF = jsonArray(final("1f1b"), "rank_activation_peak_bytes");
  // Each step's record has the peak so far: the last step's is the final one.
  EXPECT_EQ(jsonArray(json["gpipe"].substr(json["gpipe"].find("\"step\": 10,")), "rank_activation_peak_bytes"), gpipe);
  ASSERT_EQ(gpipe.size(), 2u);
  ASSERT_EQ(oneF.size(), 2u);
  // 8 stashes against 2 (and the same working buffers besides): at least 3 times as much.
  EXPECT_GT(gpipe[0], 3 * oneF[0]) << json["gpipe"] << json["1f1b"];
  const std::string trace = loom::test::readFile(dir + "/1f1b.trace.json");
  for (const char* what : {"\"rank 0\"", "\"rank 1\"", "\"cat\": \"forward\"", "\"cat\": \"backward\"",
                           "\"cat\": \"send\"", "\"cat\": \"receive\"", "\"cat\": \"optimizer\"",
                           "\"cat\": \"idle\""}) {
    EXPECT_NE(trace.find(what), std::string::npos) << what;
  }
  // 10 steps x 8 micro-batches forward and backward on each of the 2 ranks.
  EXPECT_EQ(loom::test::searchAll(trace, "\"cat\": \"forward\", \"ph\": \"X\", \"pid\": 0, \"tid\": [01]").size(), 160u);
  // ZB-H1 draws each W on its own; it holds 2 micro-batches on each stage, not GPipe's 8.
  const std::string zbTrace = loom::test::readFile(dir + "/zb-h1.trace.json");
  EXPECT_EQ(loom::test::searchAll(zbTrace, "\"cat\": \"weights\", \"ph\": \"X\", \"pid\": 0, \"tid\": [01]").size(),
            160u);
  const auto zb = jsonArray(final("zb-h1"), "rank_activation_peak_bytes");
  ASSERT_EQ(zb.size(), 2u);
  EXPECT_GT(gpipe[0], 2 * zb[0]) << json["zb-h1"];
  const std::string parse = "/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' " + dir + "/1f1b.trace.json";
  if (std::system(parse.c_str()) != 0) {
    ADD_FAILURE() << "the trace is not JSON";
  }
  std::filesystem::remove_all(dir);
}

// A pipeline stage killed mid-step: the stages before and after it, and the
// one beyond them, stop with an error naming it, not at their deadline. In
// the 2 x 2 x 2 mesh most groups do not hold the killed rank and fail when a
// neighbour gives up; every survivor still names it, by its world rank.
TEST(LoomTrain, AKilledRankStopsThePipelineAndTheMeshNamingIt) {
  if (!haveText()) GTEST_SKIP() << "dict-devil is not installed";
  const auto job = [&](int n, const std::vector<std::string>& mesh, int victim) {
    const int port = loom::test::freePort();
    std::vector<std::vector<std::string>> argvs;
    std::vector<std::map<std::string, std::string>> envs;
    for (int r = 0; r < n; ++r) {
      auto flags = mesh;
      flags.insert(flags.end(), {"--steps", "2000", "--micro-batches", "8", "--batch", "24", "--layers", "4", "--heads", "4"});
      argvs.push_back(command(mesh.front() == "3d" ? "3d" : "pp", std::vector<std::string>(flags.begin() + 1, flags.end()), "gpt"));
      envs.push_back({{"LOOM_RANK", std::to_string(r)}, {"LOOM_WORLD_SIZE", std::to_string(n)},
                      {"LOOM_STORE_ADDR", "127.0.0.1:" + std::to_string(port)},
                      {"LOOM_STORE_SECRET", "00112233445566778899aabbccddeeff"}, {"LOOM_TIMEOUT_MS", "60000"},
                      {"LOOM_HEARTBEAT_MS", "200"}, {"RANK", ""}, {"SLURM_PROCID", ""}, {"OMPI_COMM_WORLD_RANK", ""},
                      {"PMI_RANK", ""}});
    }
    const auto runs = loom::test::runProcesses(argvs, envs, std::chrono::seconds(100),
                                               loom::test::KillRule{static_cast<size_t>(victim), 0, "step   10 "});
    ASSERT_EQ(runs[static_cast<size_t>(victim)].exitCode, 128 + SIGKILL) << runs[static_cast<size_t>(victim)].output;
    const std::string named = "rank " + std::to_string(victim) + " (failed|\\(pid [0-9]+\\) exited)";
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      const auto& out = runs[static_cast<size_t>(r)];
      EXPECT_EQ(out.exitCode, 1) << "rank " << r << ": " << out.output;
      EXPECT_TRUE(loom::test::contains(out.output, named)) << "rank " << r << ": " << out.output;
      EXPECT_GE(out.afterKill.count(), 0) << "rank " << r << " ended before the kill: " << out.output;
      EXPECT_LT(out.afterKill, std::chrono::seconds(10)) << out.output;  // not the 60 s deadline
    }
  };
  job(4, {"pp"}, 1);
  job(8, {"3d", "--dp", "2", "--pp", "2", "--tp", "2"}, 5);
}

// --plot draws the loss of two runs' --json records into one PNG.
TEST(LoomTrain, PlotDrawsTheLossOfSeveralRuns) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-matplotlib is not installed";
  }
  const std::string dir = freshDir("plot");
  std::filesystem::create_directories(dir);
  const auto a = runProcess(command("single", {"--json", dir + "/a.json"}));
  const auto b = runProcess(command("ddp", {"-N", "2", "--json", dir + "/b.json"}));
  ASSERT_EQ(a.exitCode, 0) << a.output;
  ASSERT_EQ(b.exitCode, 0) << b.output;
  const auto plot = runProcess({LOOM_TRAIN_BIN, "--plot", dir + "/loss.png", dir + "/a.json", dir + "/b.json"});
  ASSERT_EQ(plot.exitCode, 0) << plot.output;
  const std::string png = loom::test::readFile(dir + "/loss.png");
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const auto missing = runProcess({LOOM_TRAIN_BIN, "--plot", dir + "/x.png", dir + "/nosuch.json"});
  EXPECT_EQ(missing.exitCode, 2);
  EXPECT_NE(missing.output.find("cannot read " + dir + "/nosuch.json"), std::string::npos) << missing.output;
  std::filesystem::remove_all(dir);
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
      {{"--frobnicate", "1"}, "--frobnicate: unknown flag"},
      {{"--resume", "1"}, "--resume 1: which checkpoint? (--checkpoint DIR)"},
      {{"--mode", "pp", "--schedule", "zigzag"}, "--schedule zigzag: not a schedule (gpipe, 1f1b, interleaved, zb-h1)"},
      {{"--mode", "ddp", "--chunks", "2"}, "--chunks: only with --mode pp"},
      {{"--mode", "pp", "-N", "2", "--chunks", "2", "--data-limit", "600"}, "--chunks 2: --schedule 1f1b runs one chunk"},
      {{"--mode", "pp", "-N", "2", "--schedule", "zb-h1", "--chunks", "2", "--data-limit", "600"},
       "--chunks 2: --schedule zb-h1 runs one chunk"},
      {{"--mode", "pp", "-N", "2", "--schedule", "interleaved", "--chunks", "2", "--micro-batches", "3", "--batch",
        "60", "--data-limit", "600"},
       "--micro-batches 3: --schedule interleaved needs a multiple of the 2 stages"},
      {{"--mode", "pp", "-N", "2", "--stages", "1,1", "--data-limit", "600"},
       "--stages 1,1: 2 chunks of 2 layers, the pipeline has 2 chunks and the model 3 layers"},
      {{"--mode", "pp", "-N", "4", "--data-limit", "600"}, "the model's 3 layers cannot make 4 pipeline chunks"},
      {{"--mode", "3d", "--dp", "2", "--pp", "2"}, "--mode 3d: give the mesh as --dp D --pp P --tp T"},
      {{"--mode", "3d", "--dp", "2", "--pp", "2", "--tp", "2", "-N", "4"}, "-N 4: --dp x --pp x --tp is 8"},
      {{"--mode", "ddp", "--tp", "2"}, "--tp: only with --mode 3d"},
      {{"--mode", "pp", "--sequence-parallel", "1"}, "--sequence-parallel 1: only with --mode tp or 3d"},
      {{"--mode", "tp", "-N", "2", "--data-limit", "600"}, "--model mlp: tensor parallelism is for the gpt model"},
      {{"--mode", "tp", "-N", "4", "--model", "gpt", "--heads", "2", "--dim", "32"}, "--tp 4: more ranks than the 2 heads"},
      {{"--tie", "1"}, "--tie 1: only the gpt model has an embedding to tie"},
      {{"--recompute", "1"}, "--recompute 1: only the gpt model has blocks to recompute"},
      {{"--sample", "5"}, "--sample: only the gpt model writes text"},
      {{"--data", "tokens.bin"}, "--data: token files are for the gpt model"},
      {{"--model", "gpt", "--data-val", "val.bin"}, "--data-val: the held-out tokens of which --data?"},
      {{"--model", "gpt", "--vocab", "50304"}, "--vocab: only with --data"},
      {{"--model", "gpt", "--tokenizer", "gpt2_tokenizer.bin"}, "--tokenizer: only with --data"},
      {{"--mode", "ddp", "--timeline", "t.json"}, "--timeline: only with --mode pp, tp, 3d or zero1-3"},
      {{"--checkpoint", "a", "--resume", "1", "--resume-from", "b"}, "--resume 1 and --resume-from b: give one of them"},
      {{"--resume-from", ""}, "--resume-from: an empty directory name"},
      {{"--eval-every", "x"}, "--eval-every x: expected a number from 0 to"},
      {{"--mode", "pp", "--balance", "speed"}, "--balance speed: params or time"},
      {{"--mode", "pp", "--data-parallel", "zero1"}, "--data-parallel zero1: only with --mode 3d"},
      {{"--mode", "3d", "--dp", "2", "--pp", "1", "--tp", "1", "--model", "gpt", "--data-parallel", "zero2"},
       "--data-parallel zero2: a pipeline sums every micro-batch's gradients before the replicas reduce them"},
      {{"--mode", "zero2", "--model", "gpt", "--tie", "1"}, "--tie 1: not with --mode zero2 yet"},
      {{"--mode", "tp", "-N", "2", "--model", "gpt", "--seq", "7", "--batch", "4", "--micro-batches", "4",
        "--sequence-parallel", "1"},
       "--sequence-parallel 1: 7 rows per micro-batch do not split over 2 tensor ranks"}};
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv{LOOM_TRAIN_BIN};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const auto r = runProcess(argv);
    EXPECT_EQ(r.exitCode, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

}  // namespace
