// The training layer's pieces, each against an oracle: OpenBLAS's products
// against the naive loop, every layer's backward against central finite
// differences of its forward, SHA-256 against FIPS 180-4's vectors, the
// batch plan's permutations, the optimizers' first steps worked by hand, and
// the accounting of model-state bytes, and the checkpoint's dense layout.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <cstring>
#include <limits>
#include <set>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "training/checkpoint.hpp"
#include "training/data/char_text.hpp"
#include "training/data/dataset.hpp"
#include "training/data/token_file.hpp"
#include "training/data/tokenizer.hpp"
#include "training/layers/cross_entropy.hpp"
#include "training/layers/gelu.hpp"
#include "training/layers/linear.hpp"
#include "training/math/gemm.hpp"
#include "training/flops.hpp"
#include "training/model.hpp"
#include "training/models/generate.hpp"
#include "training/models/gpt.hpp"
#include "training/models/mlp.hpp"
#include "training/math/bf16.hpp"
#include "training/math/exp.hpp"
#include "training/optim/optimizer.hpp"
#include "training/parallel/units.hpp"
#include "training/parallel/update.hpp"
#include "training/random.hpp"
#include "training/sequence.hpp"
#include "training/sha256.hpp"
#include "tests/support/llmc_files.hpp"

namespace {

using namespace loom::train;

TEST(Gemm, MatchesTheNaiveLoopForEveryTranspose) {
  Random random(7);
  for (auto [m, n, k] : {std::tuple<size_t, size_t, size_t>{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {64, 31, 128}}) {
    for (auto ta : {Transpose::No, Transpose::Yes}) {
      for (auto tb : {Transpose::No, Transpose::Yes}) {
        std::vector<float> a(m * k), b(k * n), c(m * n), want(m * n);
        for (float& x : a) x = random.uniform(1.0f);
        for (float& x : b) x = random.uniform(1.0f);
        gemm(ta, tb, m, n, k, a.data(), b.data(), c.data());
        gemmReference(ta, tb, m, n, k, a.data(), b.data(), want.data());
        for (size_t i = 0; i < c.size(); ++i) {
          // float32 products of k terms of magnitude <= 1, rounded k times.
          EXPECT_NEAR(c[i], want[i], 1e-6 * static_cast<double>(k)) << m << "x" << n << "x" << k;
        }
      }
    }
  }
}

// Loss of a tiny model on fixed inputs, in double for the finite differences.
double lossOf(Model& model, const std::vector<float>& x, const std::vector<int32_t>& y, size_t rows,
              std::vector<float>& dlogits) {
  const auto logits = model.forward(x, rows);
  dlogits.resize(logits.size());
  return crossEntropy(logits, y, rows, model.outFeatures(), dlogits);
}

// Every parameter's gradient from backward() against the central difference
// of the loss around it.
void expectBackwardMatchesFiniteDifferences(Model& model, const std::vector<float>& x, const std::vector<int32_t>& y,
                                            size_t rows) {
  std::vector<float> dlogits;
  lossOf(model, x, y, rows, dlogits);
  model.backward(dlogits, rows);
  const std::vector<float> analytic(model.grads().begin(), model.grads().end());
  const float h = 1e-2f;
  for (size_t i = 0; i < model.paramCount(); ++i) {
    float& p = model.params()[i];
    const float saved = p;
    p = saved + h;
    const double up = lossOf(model, x, y, rows, dlogits);
    p = saved - h;
    const double down = lossOf(model, x, y, rows, dlogits);
    p = saved;
    const double numeric = (up - down) / (2.0 * static_cast<double>(h));
    // Central differences err by O(h^2) times the third derivative, and float32 losses by ~1e-7 / h.
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 1e-2 * std::abs(numeric)) << "parameter " << i;
  }
}

TEST(Layers, BackwardMatchesFiniteDifferencesOfForward) {
  MemoryAccount account;
  Model model(account);
  buildMlp(model, 6, 5, 2, 4);  // linear, gelu, linear, gelu, linear
  model.init(3);
  Random random(11);
  const size_t rows = 3;
  std::vector<float> x(rows * 6);
  for (float& v : x) v = random.uniform(2.0f);
  const std::vector<int32_t> y{0, 3, 1};
  expectBackwardMatchesFiniteDifferences(model, x, y, rows);
}

// The GPT's layers the same way: embedding, layer norm, causal attention,
// residual branches, on two sequences of four tokens.
TEST(Layers, GptBackwardMatchesFiniteDifferencesOfForward) {
  MemoryAccount account;
  Model model(account);
  buildGpt(model, {.vocab = 5, .context = 4, .dim = 8, .heads = 2, .layers = 1});
  model.init(9);
  Random random(4);
  for (float& p : model.params()) p += random.uniform(0.1f);  // layer norms off their identity start
  const size_t rows = 8;
  std::vector<float> x(rows);
  std::vector<int32_t> y(rows);
  for (size_t r = 0; r < rows; ++r) {
    x[r] = static_cast<float>(random.below(5));
    y[r] = static_cast<int32_t>(random.below(5));
  }
  expectBackwardMatchesFiniteDifferences(model, x, y, rows);
  std::vector<float> bad{0, 1, 7, 2, 0, 1, 2, 3};  // token 7 is outside the vocabulary
  EXPECT_THROW(model.forward(bad, rows), std::invalid_argument);
}

TEST(CrossEntropy, IsLogOfClassesAtEqualLogitsAndNamesABadTarget) {
  std::vector<float> logits(2 * 4, 0.5f), d(8);
  const std::vector<int32_t> y{1, 2};
  EXPECT_NEAR(crossEntropy(logits, y, 2, 4, d), std::log(4.0), 1e-6);
  EXPECT_NEAR(d[1], (0.25 - 1.0) / 2, 1e-7);
  EXPECT_NEAR(d[0], 0.25 / 2, 1e-7);
  const std::vector<int32_t> bad{1, 4};
  EXPECT_THROW(crossEntropy(logits, bad, 2, 4, d), std::invalid_argument);
}

TEST(Sha256, MatchesTheStandardsVectors) {
  const auto digest = [](const std::string& text) {
    Sha256 sha;
    sha.update(std::as_bytes(std::span(text.data(), text.size())));
    return sha.hex();
  };
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(BatchPlan, EachEpochIsAPermutationAndEveryRankSeesTheSamePlan) {
  const BatchPlan plan(50, 10, 5), again(50, 10, 5), other(50, 10, 6);
  std::set<size_t> epoch;
  for (uint64_t s = 0; s < 5; ++s) {
    const auto batch = plan.step(s);
    EXPECT_EQ(batch, again.step(s));
    epoch.insert(batch.begin(), batch.end());
  }
  EXPECT_EQ(epoch.size(), 50u);  // five steps of ten: every sample once
  EXPECT_NE(plan.step(0), other.step(0));
  EXPECT_NE(plan.step(0), plan.step(5));  // the next epoch is shuffled anew
  const BatchPlan odd(7, 3, 1);           // a batch that straddles epochs
  EXPECT_EQ(odd.step(2).size(), 3u);
}

// The plan's work is O(batch) a step however large the dataset (counted in
// Feistel passes: under 4 a sample on average, the domain being under 4n),
// each epoch draws every sample once, and a plan made afresh (a resumed
// job's) draws the same samples at the same step.
TEST(BatchPlan, AStepCostsItsBatchAndAnEpochDrawsEverySampleOnce) {
  const size_t n = (size_t{1} << 18) + 1;  // just past 4^9: the worst ratio of domain to samples
  const size_t batch = 1000;
  const BatchPlan plan(n, batch, 11);
  std::vector<bool> drawn(n);
  size_t draws = 0;
  uint64_t mostPasses = 0;
  for (uint64_t s = 0; draws + batch <= n; ++s) {
    const uint64_t before = plan.passes();
    for (size_t i : plan.step(s)) {
      ASSERT_LT(i, n);
      ASSERT_FALSE(drawn[i]) << "sample " << i << " drawn twice in the epoch";
      drawn[i] = true;
      ++draws;
    }
    mostPasses = std::max(mostPasses, plan.passes() - before);
  }
  EXPECT_LE(mostPasses, 8 * batch);            // O(batch): ~4 x batch, never the dataset's size
  EXPECT_LE(plan.passes(), 5 * uint64_t{draws});  // and about 4 a sample over the epoch
  const BatchPlan resumed(n, batch, 11);
  EXPECT_EQ(resumed.step(123), plan.step(123));
  EXPECT_NE(BatchPlan(n, batch, 12).step(123), plan.step(123));
}

// Text windows start at every byte: window i + 1 is window i moved by one
// byte, and each window's labels are its inputs moved by one.
TEST(CharText, WindowsStartAtEveryOffset) {
  if (::access(kDevilsDictionary, R_OK) != 0) GTEST_SKIP() << "dict-devil is not installed";
  const size_t context = 16;
  const CharText text(kDevilsDictionary, CharText::Split::Train, context);
  std::vector<float> a(context), b(context);
  std::vector<int32_t> la(context), lb(context);
  for (size_t i : {size_t{0}, size_t{5}, text.size() - 2}) {
    text.sample(i, a, la);
    text.sample(i + 1, b, lb);
    for (size_t t = 0; t + 1 < context; ++t) {
      ASSERT_EQ(a[t + 1], b[t]) << i;
      ASSERT_EQ(la[t], static_cast<int32_t>(a[t + 1])) << i;
    }
    ASSERT_EQ(la[context - 1], static_cast<int32_t>(b[context - 1])) << i;
  }
}

// An llm.c token file in the temporary directory (tests/support/llmc_files.hpp).
std::string writeTokenFile(const std::string& name, const std::vector<uint32_t>& ids, int32_t magic, int32_t version,
                           size_t width, int32_t count = -1) {
  const auto path = (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".bin")).string();
  loom::test::writeLlmcTokenFile(path, ids, static_cast<uint32_t>(magic), static_cast<uint32_t>(version), width, count);
  return path;
}

// GPT-2's uint16 and LLaMA 3's uint32 files: every window at every offset,
// labels one token on, the vocabulary from the largest id (the same for
// both splits, each nine tenths and one tenth), or the one given.
TEST(TokenFile, ReadsLlmcsFilesWindowAtEveryOffset) {
  std::vector<uint32_t> ids(1000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>((i * 7919) % 50257);
  for (const auto& [magic, version, width] : {std::tuple{TokenFile::kGpt2Magic, 1, size_t{2}},
                                               std::tuple{TokenFile::kLlama3Magic, 7, size_t{4}}}) {
    SCOPED_TRACE("magic " + std::to_string(magic));
    const std::string path = writeTokenFile("tokens", ids, magic, version, width);
    const size_t context = 8;
    const TokenFile whole(path, TokenFile::Split::Whole, context);
    const TokenFile train(path, TokenFile::Split::Train, context);
    const TokenFile held(path, TokenFile::Split::Validation, context);
    EXPECT_EQ(whole.size(), 1000 - context);
    EXPECT_EQ(train.size(), 900 - context);
    EXPECT_EQ(held.size(), 100 - context);
    const uint32_t largest = *std::max_element(ids.begin(), ids.end());
    EXPECT_EQ(whole.classes(), largest + 1);
    EXPECT_EQ(held.classes(), whole.classes());
    EXPECT_EQ(TokenFile(path, TokenFile::Split::Whole, context, 50304).classes(), 50304u);
    std::vector<float> x(context);
    std::vector<int32_t> labels(context);
    for (size_t i : {size_t{0}, size_t{1}, whole.size() - 1}) {
      whole.sample(i, x, labels);
      for (size_t t = 0; t < context; ++t) {
        ASSERT_EQ(x[t], static_cast<float>(ids[i + t])) << i;
        ASSERT_EQ(labels[t], static_cast<int32_t>(ids[i + t + 1])) << i;
      }
    }
    held.sample(0, x, labels);
    EXPECT_EQ(x[0], static_cast<float>(ids[900]));
    std::remove(path.c_str());
  }
}

// What is not such a file, or not enough of one, is named with the file.
TEST(TokenFile, BadFilesAreNamed) {
  const std::vector<uint32_t> ids{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const auto refused = [](const std::string& path, size_t context, size_t vocab, const std::string& why) {
    try {
      TokenFile file(path, TokenFile::Split::Whole, context, vocab);
      ADD_FAILURE() << path << " was read";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(vocab != 0 ? "--vocab" : path), std::string::npos) << e.what();
    }
  };
  refused("/nonexistent/tokens.bin", 4, 0, "cannot open");
  const std::string wrongMagic = writeTokenFile("magic", ids, 12345, 1, 2);
  refused(wrongMagic, 4, 0, "not a token file of llm.c's (magic 12345 version 1");
  const std::string wrongVersion = writeTokenFile("version", ids, TokenFile::kGpt2Magic, 2, 2);
  refused(wrongVersion, 4, 0, "magic 20240520 version 2");
  const std::string overCounted = writeTokenFile("count", ids, TokenFile::kGpt2Magic, 1, 2, 20);
  refused(overCounted, 4, 0, "its header counts 20 tokens of 2 bytes, but the file holds 12 after the header");
  const std::string fine = writeTokenFile("fine", ids, TokenFile::kGpt2Magic, 1, 2);
  refused(fine, 12, 0, "12 tokens, not more than one window of 12");
  refused(fine, 4, 5, "holds token id 12");
  for (const auto& path : {wrongMagic, wrongVersion, overCounted, fine}) std::remove(path.c_str());
}

// An llm.c tokenizer file in the temporary directory; `vocabulary` < 0: the number of tokens given.
std::string writeTokenizerFile(const std::string& name, uint32_t magic, uint32_t version, uint32_t endOfText,
                               const std::vector<std::string>& tokens, int64_t vocabulary = -1) {
  const auto path = (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".bin")).string();
  loom::test::writeLlmcTokenizer(path, tokens, magic, version, endOfText, vocabulary);
  return path;
}

// Version 2 names its end of text; version 1 is GPT-2's 50257 tokens, the
// last its end of text. Tokens are bytes (a piece of UTF-8 among them), and
// an id past the vocabulary (a padded one) decodes as itself.
TEST(Tokenizer, DecodesLlmcsFiles) {
  const std::vector<std::string> tokens{"a", " the", "\n", "\xc3", "\xa9", "<|endoftext|>"};
  const std::string v2 = writeTokenizerFile("tokenizer2", Tokenizer::kMagic, 2, 5, tokens);
  const Tokenizer small(v2);
  EXPECT_EQ(small.size(), 6u);
  EXPECT_EQ(small.endOfText(), 5);
  std::string text;
  for (int32_t id : {0, 1, 2, 3, 4, 5}) text += small.decode(id);
  EXPECT_EQ(text, "a the\n\xc3\xa9<|endoftext|>");
  EXPECT_EQ(small.decode(6), "<|6|>");
  EXPECT_EQ(small.decode(-1), "<|-1|>");
  std::vector<std::string> gpt2(50257);
  for (size_t i = 0; i < gpt2.size(); ++i) gpt2[i] = "t" + std::to_string(i);
  const std::string v1 = writeTokenizerFile("tokenizer1", Tokenizer::kMagic, 1, 0, gpt2);
  const Tokenizer full(v1);
  EXPECT_EQ(full.size(), 50257u);
  EXPECT_EQ(full.endOfText(), 50256);
  EXPECT_EQ(full.decode(50256), "t50256");
  EXPECT_EQ(full.decode(50300), "<|50300|>");
  std::remove(v2.c_str());
  std::remove(v1.c_str());
}

// What is not such a file, or not all of one, is named with the file.
TEST(Tokenizer, BadFilesAreNamed) {
  const auto refused = [](const std::string& path, const std::string& why) {
    try {
      Tokenizer tokenizer(path);
      ADD_FAILURE() << path << " was read";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": " + why), std::string::npos) << e.what();
    }
  };
  const std::vector<std::string> tokens{"a", "b", "c"};
  refused("/nonexistent/gpt2_tokenizer.bin", "cannot open");
  const std::vector<std::string> paths{
      writeTokenizerFile("tok_magic", 20240520, 2, 0, tokens), writeTokenizerFile("tok_version", Tokenizer::kMagic, 3, 0, tokens),
      writeTokenizerFile("tok_v1", Tokenizer::kMagic, 1, 0, tokens), writeTokenizerFile("tok_eot", Tokenizer::kMagic, 2, 3, tokens),
      writeTokenizerFile("tok_short", Tokenizer::kMagic, 2, 0, tokens, 5),
      writeTokenizerFile("tok_empty", Tokenizer::kMagic, 2, 0, {"a", "", "c"})};
  refused(paths[0], "not a tokenizer file of llm.c's (magic 20240520 version 2");
  refused(paths[1], "not a tokenizer file of llm.c's (magic 20240328 version 3");
  refused(paths[2], "version 1 is GPT-2's 50257 tokens, but its header says 3");
  refused(paths[3], "its end-of-text token 3 is past its 3 tokens");
  refused(paths[4], "its header counts 5 tokens, but the file ends after 3");
  refused(paths[5], "token 1 has no bytes");
  // A token cut short by the end of the file.
  const std::string cut = writeTokenizerFile("tok_cut", Tokenizer::kMagic, 2, 0, tokens);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 1);
  refused(cut, "the file ends inside token 2");
  for (const auto& path : paths) std::remove(path.c_str());
  std::remove(cut.c_str());
}

TEST(Optimizers, FirstStepsAsWorkedByHand) {
  MemoryAccount account;
  std::vector<float> p{1.0f, -2.0f};
  const std::vector<float> g{0.5f, -0.25f};
  auto adam = makeAdamW(account, 2, {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weightDecay = 0.1f});
  adam->step(p, g, 0.01f);
  // Step 1: decay p by lr*wd, then m^ = g and v^ = g^2, so the update is lr * sign(g).
  EXPECT_NEAR(p[0], 1.0 * (1 - 0.001) - 0.01, 1e-6);
  EXPECT_NEAR(p[1], -2.0 * (1 - 0.001) + 0.01, 1e-6);
  std::vector<float> q{1.0f};
  auto sgd = makeSgd(account, 1, {.momentum = 0.5f, .weightDecay = 0.0f});
  sgd->step(q, std::vector<float>{2.0f}, 0.1f);  // v = 2
  sgd->step(q, std::vector<float>{2.0f}, 0.1f);  // v = 0.5 * 2 + 2 = 3
  EXPECT_NEAR(q[0], 1.0 - 0.2 - 0.3, 1e-6);
  EXPECT_FLOAT_EQ(learningRate(0, 4, 20, 1.0f, 0.0f), 0.25f);
  EXPECT_FLOAT_EQ(learningRate(4, 4, 20, 1.0f, 0.0f), 1.0f);
  EXPECT_NEAR(learningRate(20, 4, 20, 1.0f, 0.1f), 0.1, 1e-6);
}

// Single-process fp32 AdamW: 4 bytes of parameters, 4 of gradients and 8 of
// moments per parameter, every byte of them counted.
TEST(MemoryAccount, ModelStatesAreSixteenBytesPerParameterWithAdamW) {
  MemoryAccount account;
  Model model(account);
  buildMlp(model, 784, 64, 1, 10);
  auto adam = makeAdamW(account, model.paramCount(), {});
  EXPECT_EQ(account.modelStates(), 16 * model.paramCount());
  EXPECT_EQ(account.current(Category::Parameters), 4 * model.paramCount());
  EXPECT_EQ(account.current(Category::OptimizerState), 8 * model.paramCount());
  adam.reset();
  EXPECT_EQ(account.current(Category::OptimizerState), 0u);
  EXPECT_EQ(account.peakModelStates(), 16 * model.paramCount());
}

// bf16 rounding as hardware does it: nearest, ties to even; infinities and
// NaNs kept; what does not fit rounds to infinity.
TEST(Bf16, RoundsToNearestEvenAndKeepsTheSpecials) {
  const auto bitsOf = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  const auto fromBits = [](uint32_t b) {
    float v;
    std::memcpy(&v, &b, sizeof v);
    return v;
  };
  EXPECT_EQ(narrow(1.0f).bits, 0x3f80);
  EXPECT_EQ(narrow(-2.5f).bits, 0xc020);
  EXPECT_EQ(widen(narrow(3.140625f)), 3.140625f);  // exact in bf16
  // Halfway between two bf16s: to the even one.
  EXPECT_EQ(narrow(fromBits(0x3f808000u)).bits, 0x3f80);  // 1 + 2^-8: down to 1 (even)
  EXPECT_EQ(narrow(fromBits(0x3f818000u)).bits, 0x3f82);  // up to the even neighbour
  EXPECT_EQ(narrow(fromBits(0x3f808001u)).bits, 0x3f81);  // past halfway: up
  EXPECT_EQ(narrow(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(narrow(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds past the largest bf16
  EXPECT_TRUE(std::isnan(widen(narrow(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(widen(narrow(fromBits(0x7f800001u)))));  // a NaN whose payload is in the low bits
  EXPECT_EQ(bitsOf(widen(narrow(-0.0f))), 0x80000000u);
  // Every bf16 survives a round trip through float.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const bf16 v{static_cast<uint16_t>(b)};
    if (std::isnan(widen(v))) continue;
    ASSERT_EQ(narrow(widen(v)).bits, v.bits) << b;
  }
}

// A bf16 model holds 2 + 2 bytes per parameter and the optimizer's fp32
// master weights and moments 12: ZeRO's 16 bytes, split as its paper does.
TEST(MemoryAccount, Bf16ModelStatesAreTwoTwoAndTwelve) {
  MemoryAccount account;
  Model model(account, Precision::Bf16);
  buildMlp(model, 784, 64, 1, 10);
  Update<bf16> update(account, model.paramCount(), TrainConfig{});
  const size_t psi = model.paramCount();
  EXPECT_EQ(account.current(Category::Parameters), 2 * psi);
  EXPECT_EQ(account.current(Category::Gradients), 2 * psi);
  EXPECT_EQ(account.current(Category::OptimizerState), 12 * psi);
  EXPECT_EQ(account.modelStates(), 16 * psi);
  EXPECT_TRUE(model.params<float>().empty());
}

// The bf16 step is the fp32 step on the master weights, the gradients widened
// (one block and a partial one here), then narrowed into the parameters.
TEST(Optimizers, TheBf16StepIsTheFp32StepOnMasterWeights) {
  MemoryAccount account;
  const size_t n = 40000;  // more than one block of widened gradients
  Random random(3);
  std::vector<float> p(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    p[i] = widen(narrow(random.normal(1.0f)));
    g[i] = widen(narrow(random.normal(0.01f)));
  }
  std::vector<bf16> p16(n), g16(n);
  narrow(p, p16);
  narrow(g, g16);
  TrainConfig config;
  config.adamw.weightDecay = 0.01f;
  Update<bf16> mixed(account, n, config);
  Update<float> plain(account, n, config);
  mixed.load(p16);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> gs = g;  // the fp32 step scales its gradients in place
    mixed.step(p16, g16, 0.5f, 0.75f, 1e-3f);
    plain.step(p, gs, 0.5f, 0.75f, 1e-3f);
  }
  const auto master = mixed.components(p16)[0];
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(master[i], p[i]) << i;  // bit for bit
    ASSERT_EQ(p16[i].bits, narrow(p[i]).bits) << i;
  }
  EXPECT_EQ(mixed.sumOfSquares(g16, 0.5f), plain.sumOfSquares(g, 0.5f));
}

TEST(Precision, NamesAreParsedAndABadOneIsNamed) {
  EXPECT_EQ(parsePrecision("fp32"), Precision::Fp32);
  EXPECT_EQ(parsePrecision("bf16"), Precision::Bf16);
  EXPECT_STREQ(precisionName(Precision::Bf16), "bf16");
  try {
    parsePrecision("fp16");
    FAIL() << "fp16 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--precision fp16"), std::string::npos) << e.what();
  }
}

// Activation recompute: the GPT's gradients (and dL/dx of every layer) are
// the same bits with and without it, twice in a row (the second backward
// recomputes from a forward whose activations were freed), and the
// activations' peak is lower.
// Zero-bubble pipelines run backward in two halves (Layer::backwardInput,
// then ::backwardWeights): for the MLP's and the GPT's layers (with and
// without recompute, with and without a first layer that takes no dL/dx),
// the halves give the whole backward's dL/dx and gradients bit for bit,
// also when another micro-batch's forward and B run on a second copy of
// the layers, bound to the same parameters and gradients, between them.
TEST(Layers, SplitBackwardIsTheWholeBackwardBitForBit) {
  struct Case {
    std::string name;
    std::function<void(Model&)> build;
    size_t first;  // the first layer taken: 0 takes ids (no dL/dx), 1 floats
    size_t width;  // input features from `first`
  };
  const GptShape gpt{.vocab = 11, .context = 4, .dim = 8, .heads = 2, .layers = 2};
  GptShape recomputed = gpt;
  recomputed.recompute = true;
  const std::vector<Case> cases{
      {"mlp", [](Model& m) { buildMlp(m, 6, 5, 2, 4); }, 0, 6},
      {"gpt", [&](Model& m) { buildGpt(m, gpt); }, 0, 1},
      {"gpt blocks", [&](Model& m) { buildGpt(m, gpt); }, 1, gpt.dim},
      {"gpt blocks, recomputed", [&](Model& m) { buildGpt(m, recomputed); }, 1, gpt.dim}};
  for (const Case& c : cases) {
    MemoryAccount account;
    Model model(account);
    c.build(model);
    model.init(5);
    const size_t last = model.layers() - 1, rows = 8;
    const size_t offset = model.slices()[c.first].offset, count = model.paramCount() - offset;
    std::vector<float> params(model.params().begin() + static_cast<std::ptrdiff_t>(offset), model.params().end());
    Random random(17);
    // Two micro-batches: inputs (ids for the embedding) and dL/dy.
    std::vector<std::vector<float>> x(2), dy(2);
    for (int k = 0; k < 2; ++k) {
      for (size_t r = 0; r < rows * c.width; ++r) {
        x[k].push_back(c.first == 0 && c.name != "mlp" ? static_cast<float>(random.below(gpt.vocab)) : random.uniform(1.0f));
      }
      for (size_t r = 0; r < rows * model.outFeatures(); ++r) dy[k].push_back(random.uniform(1.0f));
    }
    const auto copy = [&](std::vector<float>& grads) {
      Model twin(account);
      c.build(twin);
      Sequence seq = twin.takeLayers(c.first, last);
      seq.bind(params, grads);
      return seq;
    };
    const auto bits = [](const std::vector<float>& v) {
      std::vector<uint32_t> out(v.size());
      if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
      return out;
    };
    // The reference: the whole backward of each micro-batch.
    std::vector<float> wholeGrads(count);
    Sequence whole = copy(wholeGrads);
    std::vector<std::vector<float>> expectGrads(2), expectDx(2);
    for (int k = 0; k < 2; ++k) {
      whole.forward(x[k], rows);
      expectDx[k].assign(c.first == 0 ? 0 : rows * c.width, 0.0f);
      whole.backward(dy[k], expectDx[k], rows);
      expectGrads[k] = wholeGrads;
    }
    // The halves on two copies sharing one set of parameters and gradients: F0 F1 B0 B1 W0 W1.
    std::vector<float> grads(count);
    Sequence a = copy(grads);
    Sequence b = copy(grads);
    std::vector<std::vector<float>> dx(2, std::vector<float>(c.first == 0 ? 0 : rows * c.width));
    a.forward(x[0], rows);
    b.forward(x[1], rows);
    a.backwardInput(dy[0], dx[0], rows);
    b.backwardInput(dy[1], dx[1], rows);
    a.backwardWeights();
    EXPECT_EQ(bits(grads), bits(expectGrads[0])) << c.name;
    b.backwardWeights();
    EXPECT_EQ(bits(grads), bits(expectGrads[1])) << c.name;
    for (int k = 0; k < 2; ++k) EXPECT_EQ(bits(dx[k]), bits(expectDx[k])) << c.name << " micro-batch " << k;
  }
}

TEST(Recompute, GradientsAreTheSameBitsWithLessActivationMemory) {
  const GptShape plain{.vocab = 13, .context = 8, .dim = 16, .heads = 2, .layers = 3};
  GptShape again = plain;
  again.recompute = true;
  const size_t rows = 4 * plain.context;
  std::vector<float> tokens(rows);
  std::vector<int32_t> targets(rows);
  for (size_t r = 0; r < rows; ++r) {
    tokens[r] = static_cast<float>((r * 7 + 3) % plain.vocab);
    targets[r] = static_cast<int32_t>((r * 5 + 1) % plain.vocab);
  }
  const auto run = [&](const GptShape& shape, size_t& peak) {
    MemoryAccount account;
    Model gpt(account);
    buildGpt(gpt, shape);
    gpt.init(3);
    std::vector<float> grads;
    for (int pass = 0; pass < 2; ++pass) {
      const auto logits = gpt.forward(tokens, rows);
      std::vector<float> dlogits(logits.size());
      crossEntropy(logits, targets, rows, shape.vocab, dlogits);
      gpt.backward(dlogits, rows);
      grads.insert(grads.end(), gpt.grads().begin(), gpt.grads().end());
    }
    peak = account.peak(Category::Activations);
    return grads;
  };
  size_t plainPeak = 0, recomputedPeak = 0;
  const auto expected = run(plain, plainPeak);
  const auto got = run(again, recomputedPeak);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  EXPECT_LT(recomputedPeak, plainPeak * 3 / 4) << recomputedPeak << " against " << plainPeak;
}

// The vectorizable e^x stays within 2 ulp of glibc's over the range it
// serves (softmax arguments down to -87, GELU's 2u up to 88), and clamps
// beyond it instead of making infinities or denormals.
TEST(ExpFloat, WithinTwoUlpOfGlibc) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.001373f) {
    const double exact = std::exp(static_cast<double>(x));
    const auto ulp = static_cast<double>(std::nextafter(static_cast<float>(exact), INFINITY) - static_cast<float>(exact));
    worst = std::max(worst, std::abs(static_cast<double>(expFloat(x)) - exact) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(expFloat(0.0f), 1.0f);
  EXPECT_TRUE(std::isfinite(expFloat(1000.0f)));
  EXPECT_GT(expFloat(-1000.0f), 0.0f);
  EXPECT_LT(expFloat(-1000.0f), 1e-37f);
}

// The FLOPs MFU counts, worked by hand for a GPT of vocabulary 11, context
// 4, 12 channels, 1 block: 2220 parameters, of which wte (11 x 12) and wpe
// (4 x 12) are looked up; per token 6 x 2040 for the products and 12 x 1 x
// 12 x 4 for attention; 4 tokens a sample. An MLP row: 6 per parameter.
TEST(Flops, CountedAsLlmcDoes) {
  MemoryAccount account;
  const GptShape shape{.vocab = 11, .context = 4, .dim = 12, .heads = 3, .layers = 1};
  Model gpt(account);
  buildGpt(gpt, shape);
  ASSERT_EQ(gpt.paramCount(), 2220u);
  EXPECT_EQ(flopsPerSample(gpt, &shape), 4.0 * (6 * 2040 + 12 * 12 * 4));
  Model mlp(account);
  buildMlp(mlp, 5, 3, 1, 2);  // 5x3 + 3, 3x2 + 2: 26 parameters
  EXPECT_EQ(flopsPerSample(mlp, nullptr), 6.0 * 26);
  EXPECT_GT(measurePeakFlops(0.01), 1e6);  // any CPU does a megaflop a second
}

// Greedy text is the argmax of the logits at the last token of the window,
// the same every time; a seed draws other text, the same for the same seed;
// a prompt longer than the context slides the window.
TEST(Generate, GreedyIsTheLastTokensArgmaxAndASeedRepeats) {
  MemoryAccount account;
  const GptShape shape{.vocab = 11, .context = 4, .dim = 12, .heads = 3, .layers = 1};
  Model gpt(account);
  buildGpt(gpt, shape);
  gpt.init(5);
  const std::vector<int32_t> prompt{3, 1, 4};
  const auto greedy = generate(gpt, 4, prompt, 6, 0);
  ASSERT_EQ(greedy.size(), 6u);
  EXPECT_EQ(generate(gpt, 4, prompt, 6, 0), greedy);
  const std::vector<float> window{3, 1, 4, 0};
  const auto logits = gpt.forward(window, 4).subspan(2 * 11, 11);
  EXPECT_EQ(greedy[0], std::max_element(logits.begin(), logits.end()) - logits.begin());
  const auto drawn = generate(gpt, 4, prompt, 30, 9);
  EXPECT_EQ(generate(gpt, 4, prompt, 30, 9), drawn);
  EXPECT_NE(generate(gpt, 4, prompt, 30, 10), drawn);
  for (int32_t t : drawn) EXPECT_TRUE(t >= 0 && t < 11) << t;
  // Six tokens of prompt in a window of four: the last four are what counts.
  EXPECT_EQ(generate(gpt, 4, {9, 9, 3, 1, 4, 2}, 3, 0), generate(gpt, 4, {3, 1, 4, 2}, 3, 0));
  EXPECT_THROW(generate(gpt, 4, {}, 1, 0), std::invalid_argument);
}

// Units as DDP's buckets: from the last layer, the first closing at
// firstCap bytes and the rest at cap; layers without parameters in none.
// SmallEnds::Both also closes the first layers into a unit of firstCap,
// the forward's first (ZeRO-1/2 gather in that order).
TEST(Units, BucketsFromTheBackAndASmallFrontForTheForward) {
  std::vector<Model::Slice> slices;
  size_t at = 0;
  for (size_t count : {10, 20, 0, 30, 40, 50}) {
    slices.push_back({at, count});
    at += count;
  }
  const auto layers = [](const std::vector<Unit>& units) {
    std::vector<std::pair<size_t, size_t>> out;
    for (const Unit& u : units) out.emplace_back(u.firstLayer, u.lastLayer);
    return out;
  };
  using Layers = std::vector<std::pair<size_t, size_t>>;
  const auto back = planUnits(slices, 25, 1000, 1);
  EXPECT_EQ(layers(back), (Layers{{5, 5}, {0, 4}}));
  EXPECT_EQ(back[1].offset, 0u);
  EXPECT_EQ(back[1].count, 100u);
  const auto both = planUnits(slices, 25, 1000, 1, SmallEnds::Both);
  EXPECT_EQ(layers(both), (Layers{{5, 5}, {3, 4}, {0, 1}}));
  EXPECT_EQ(both[2].count, 30u);
  EXPECT_EQ(both[1].offset, 30u);
  EXPECT_EQ(layers(planUnits(slices, 0, 0, 1, SmallEnds::Both)), (Layers{{5, 5}, {4, 4}, {3, 3}, {1, 1}, {0, 0}}));
  const auto units = unitOfLayer(both, slices.size());
  EXPECT_EQ(units, (std::vector<long>{2, 2, -1, 1, 1, 0}));  // layer 2 has no parameters, between two units
}

// The checkpoint's state in the dense order: three parts whose runs
// interleave (as ZeRO's shards do) read back as ranges across them, one
// that no part holds is named, a step whose parts are written but not
// published is not what a reader sees, and publishing keeps the newest two
// and removes a newer stale one.
TEST(Checkpoint, PartsInterleaveAndOnlyAPublishedStepIsRead) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "loom-checkpoint-" + std::to_string(::getpid());
  fs::remove_all(dir);
  constexpr size_t kParams = 10;
  constexpr size_t kComponents = 2;
  // Component c of parameter i is 100 c + i + step / 10.
  const auto value = [](size_t c, size_t i, uint64_t step) { return static_cast<float>(100 * c + i) + static_cast<float>(step) / 10; };
  const auto write = [&](uint64_t step, bool publish) {
    const CheckpointInfo info{.step = step, .optimizerSteps = step + 1, .params = kParams, .components = kComponents};
    // Part r holds [0,2) [6,8) for r 0, [2,4) [8,10) for r 1, [4,6) for r 2.
    const std::vector<std::vector<Placement>> places{{{0, 0, 2}, {6, 2, 2}}, {{2, 0, 2}, {8, 2, 2}}, {{4, 0, 2}}};
    for (int r = 0; r < 3; ++r) {
      std::vector<std::vector<float>> local(kComponents, std::vector<float>(4));
      for (const Placement& p : places[static_cast<size_t>(r)]) {
        for (size_t c = 0; c < kComponents; ++c) {
          for (size_t i = 0; i < p.count; ++i) local[c][p.local + i] = value(c, p.dense + i, step);
        }
      }
      std::vector<std::span<float>> spans(local.begin(), local.end());
      writePart(dir, info, r, 3, runsOf(places[static_cast<size_t>(r)], spans));
    }
    if (publish) publishCheckpoint(dir, info, 3, {{"--seed", "7"}, {"--mode", "zero1"}});
  };
  write(4, true);
  write(8, true);
  write(12, false);  // killed before its manifest: the reader still sees step 8
  {
    const CheckpointReader reader(dir, {{"--seed", "7"}});
    EXPECT_EQ(reader.info().step, 8u);
    EXPECT_EQ(reader.info().optimizerSteps, 9u);
    EXPECT_EQ(reader.settings().at("--mode"), "zero1");
    for (size_t c = 0; c < kComponents; ++c) {
      std::vector<float> got(7);
      reader.read(c, 1, got);  // across all three parts
      for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], value(c, 1 + i, 8)) << c << " " << i;
    }
    std::vector<float> past(2);
    EXPECT_THROW(reader.read(0, 9, past), std::runtime_error);  // parameter 10 is in no part
    EXPECT_THROW(reader.read(2, 0, past), std::runtime_error);  // no third component
  }
  try {
    const CheckpointReader other(dir, {{"--seed", "8"}});
    FAIL() << "another seed accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("was written with --seed 7, not 8"), std::string::npos) << e.what();
  }
  write(6, true);  // a job resumed (--resume-from) at step 4 elsewhere checkpoints here at 6: 8 and 12 go
  EXPECT_TRUE(fs::exists(dir + "/step-00000004"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000006"));
  EXPECT_FALSE(fs::exists(dir + "/step-00000008"));
  EXPECT_FALSE(fs::exists(dir + "/step-00000012"));
  EXPECT_EQ(CheckpointReader(dir, {}).info().step, 6u);
  write(10, true);
  EXPECT_FALSE(fs::exists(dir + "/step-00000004"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000006"));
  fs::remove_all(dir);
}

}  // namespace
