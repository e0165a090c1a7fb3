// The tiny GPT against PyTorch 1.13 (Debian's python3-torch): the test
// writes the model's shape, its initial parameters and one batch, runs
// training/golden/tiny_gpt.py (the same model in torch, functional, on the
// same flat parameters), and holds Loom's logits, loss, every gradient and
// the losses of 10 AdamW steps to torch's.
// Skips, saying so, where torch is not installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "training/layers/cross_entropy.hpp"
#include "training/memory.hpp"
#include "training/models/gpt.hpp"
#include "training/optim/optimizer.hpp"
#include "training/random.hpp"

namespace {

using namespace loom::train;

template <class T>
void put(std::ofstream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
void putAll(std::ofstream& out, const std::vector<T>& v) {
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}
template <class T>
T take(std::ifstream& in) {
  T v{};
  in.read(reinterpret_cast<char*>(&v), sizeof v);
  return v;
}
template <class T>
std::vector<T> takeAll(std::ifstream& in, size_t n) {
  std::vector<T> v(n);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
  return v;
}

// The largest |a - b| over the largest |b|: an error relative to the data's scale.
double scaledError(std::span<const float> a, std::span<const float> b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / std::max(scale, 1e-30);
}

TEST(GptGolden, LogitsLossGradientsAndAdamWStepsMatchPyTorch) {
  const GptShape shape{.vocab = 13, .context = 8, .dim = 16, .heads = 2, .layers = 2};
  const size_t batch = 3, steps = 10;
  const AdamWSettings adamw{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weightDecay = 0.1f};
  const float lr = 1e-2f;
  MemoryAccount account;
  Model model(account);
  buildGpt(model, shape);
  model.init(17);
  const std::vector<float> init(model.params().begin(), model.params().end());
  Random random(23);
  std::vector<int32_t> tokens(batch * shape.context), targets(tokens.size());
  for (auto& t : tokens) t = static_cast<int32_t>(random.below(shape.vocab));
  for (auto& t : targets) t = static_cast<int32_t>(random.below(shape.vocab));

  const std::string dir = ::testing::TempDir() + "loom-golden-" + std::to_string(::getpid());
  const std::string in = dir + ".in", out = dir + ".out";
  {
    std::ofstream f(in, std::ios::binary);
    for (int64_t v : {shape.vocab, shape.context, shape.dim, shape.heads, shape.layers, batch, steps}) put(f, v);
    for (double v : {static_cast<double>(lr), static_cast<double>(adamw.beta1), static_cast<double>(adamw.beta2),
                     static_cast<double>(adamw.eps), static_cast<double>(adamw.weightDecay)}) {
      put(f, v);
    }
    put(f, static_cast<int64_t>(init.size()));
    putAll(f, init);
    putAll(f, tokens);
    putAll(f, targets);
  }
  const std::string command = "/usr/bin/python3 " LOOM_SOURCE_DIR "/training/golden/tiny_gpt.py " + in + " " + out;
  const int status = std::system(command.c_str());
  ::unlink(in.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "PyTorch is not installed (python3-torch)";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
  std::ifstream f(out, std::ios::binary);
  const auto golden = takeAll<float>(f, static_cast<size_t>(take<int64_t>(f)));
  const auto goldenLoss = take<double>(f);
  const auto goldenGrads = takeAll<float>(f, static_cast<size_t>(take<int64_t>(f)));
  const auto goldenLosses = takeAll<double>(f, static_cast<size_t>(take<int64_t>(f)));
  ASSERT_TRUE(f) << "short golden file " << out;
  ::unlink(out.c_str());

  const size_t rows = batch * shape.context;
  std::vector<float> x(tokens.begin(), tokens.end()), dlogits;
  const auto logits = model.forward(x, rows);
  ASSERT_EQ(logits.size(), golden.size());
  dlogits.resize(logits.size());
  const double loss = crossEntropy(logits, targets, rows, shape.vocab, dlogits);
  model.backward(dlogits, rows);
  // float32 throughout on both sides, summed in other orders (BLAS and
  // attention loops against torch's): a few ulps per operation over some
  // tens of operations deep, so 1e-5 of the data's scale for the forward
  // and 1e-4 for gradients, whose subtractions cancel more.
  EXPECT_LT(scaledError(logits, golden), 1e-5);
  EXPECT_NEAR(loss, goldenLoss, 1e-5 * goldenLoss);
  EXPECT_LT(scaledError(model.grads(), goldenGrads), 1e-4);

  std::copy(init.begin(), init.end(), model.params().begin());
  auto optimizer = makeAdamW(account, model.paramCount(), adamw);
  for (size_t s = 0; s < steps; ++s) {
    const auto l = model.forward(x, rows);
    const double stepLoss = crossEntropy(l, targets, rows, shape.vocab, dlogits);
    model.backward(dlogits, rows);
    // Ten steps compound the roundings; Adam's normalized steps keep them from growing much.
    EXPECT_NEAR(stepLoss, goldenLosses[s], 1e-4 * goldenLosses[s]) << "step " << s;
    optimizer->step(model.params(), model.grads(), lr);
  }
  // Not compared: the parameters themselves. Where a gradient is zero but
  // for rounding (position 0 attends to itself alone, so its query gets
  // none), Adam's normalized step turns either side's noise into a full
  // step of lr, and the two sides part by up to lr per step there.
}

}  // namespace
