// Tensor parallelism against the dense layers it splits, ranks as threads:
//
//   - the mappings (all-reduce, row all-gather, row reduce-scatter) move
//     rank-valued integers exactly;
//   - column-parallel layers and the vocab-parallel embedding are bitwise
//     their dense twins on the parameters and gradients they hold (the same
//     dot products, in the same order); a column-parallel layer's outputs are
//     the same dot products too, but OpenBLAS's sgemm sums an output column
//     in an order that depends on where the column falls in its kernel's
//     block (on this AMD EPYC's Haswell kernel the narrower share's columns
//     round differently in about one output in two), so they are held to the
//     reordering bound;
//   - row-parallel layers, dL/dx of column-parallel ones, the
//     vocab-parallel cross-entropy and whole GPT blocks sum partial
//     products in another order: within the bound that reordering allows;
//   - odd sizes everywhere (13 inputs, 17 outputs, 7 rows; 3 heads over 2
//     ranks).
#include <gtest/gtest.h>
#include <loom/loom.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/support/ranks.hpp"
#include "training/layers/cross_entropy.hpp"
#include "training/layers/embedding.hpp"
#include "training/layers/linear.hpp"
#include "training/layers/parallel_embedding.hpp"
#include "training/layers/parallel_linear.hpp"
#include "training/models/gpt.hpp"

namespace {

using namespace loom::train;
using loom::test::onThreads;

constexpr double kUnit = 0x1.0p-24;  // float32's unit roundoff

std::vector<float> randomFloats(size_t n, uint64_t seed, float bound = 1.0f) {
  Random random(seed);
  std::vector<float> out(n);
  for (float& v : out) v = random.uniform(bound);
  return out;
}

// T ranks as threads, each given its tensor group.
void onGroup(int size, bool sequence, const std::function<void(const TensorGroup&)>& fn) {
  std::vector<loom::Comm> comms = loom::Comm::all(size);
  onThreads(size, [&](int rank) { fn(TensorGroup{&comms[static_cast<size_t>(rank)], rank, size, sequence, nullptr}); });
}

// Two orders of summing K terms each differ from the exact sum by at most
// (K - 1) u sum|term|, so from each other by twice that.
double reorderBound(size_t k, double absSum) { return 2.0 * static_cast<double>(k) * kUnit * absSum; }

TEST(TensorParallel, MappingsMoveRankValuedIntegersExactly) {
  constexpr size_t n = 5;  // rows of one float each
  for (int size : {1, 2, 3, 4}) {
    onGroup(size, true, [&](const TensorGroup& g) {
      uint64_t bytes = 0;
      TensorGroup counted = g;
      counted.bytes = &bytes;
      const auto t = static_cast<float>(size), r = static_cast<float>(g.rank + 1);
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = r * static_cast<float>(i + 1);
      counted.allReduce(x);  // g forward, f backward
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(x[i], t * (t + 1) / 2 * static_cast<float>(i + 1));
      std::vector<float> local(n), full(n * static_cast<size_t>(size));
      for (size_t i = 0; i < n; ++i) local[i] = r * 100 + static_cast<float>(i);
      counted.allGatherRows(local, full);  // f' forward, g' backward
      for (size_t j = 0; j < full.size(); ++j) {
        EXPECT_EQ(full[j], static_cast<float>(j / n + 1) * 100 + static_cast<float>(j % n)) << j;
      }
      for (size_t j = 0; j < full.size(); ++j) full[j] = r * static_cast<float>(j + 1);
      counted.reduceScatterRows(full, local);  // g' forward, f' backward
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(local[i], t * (t + 1) / 2 * static_cast<float>(static_cast<size_t>(g.rank) * n + i + 1));
      }
      EXPECT_EQ(bytes, size == 1 ? 0 : (n + n + n * static_cast<size_t>(size)) * sizeof(float));
    });
  }
}

TEST(TensorParallel, SharesDealEveryUnitOnceFirstRanksOneMore) {
  for (size_t units : {1, 7, 13, 17}) {
    for (int parts = 1; parts <= 4; ++parts) {
      size_t next = 0;
      for (int p = 0; p < parts; ++p) {
        const Share s = shareOf(units, parts, p);
        EXPECT_EQ(s.first, next);
        EXPECT_EQ(s.count, units / static_cast<size_t>(parts) + (static_cast<size_t>(p) < units % static_cast<size_t>(parts) ? 1 : 0));
        next += s.count;
      }
      EXPECT_EQ(next, units);
    }
  }
}

struct LinearCase {
  size_t in, blocks, units, unit;
};

// The dense layer's forward and backward on 7 rows.
struct DenseLinear {
  DenseLinear(size_t in, size_t out, size_t rows, uint64_t seed)
      : layer(in, out), params(randomFloats(in * out + out, seed)), grads(params.size()),
        x(randomFloats(rows * in, seed + 1)), dy(randomFloats(rows * out, seed + 2)), y(rows * out), dx(rows * in) {
    layer.bind(params, grads);
    layer.forward(x, y, rows);
    layer.backward(dy, dx, rows);
  }
  Linear layer;
  std::vector<float> params, grads, x, dy, y, dx;
};

TEST(TensorParallel, ColumnParallelLinearIsTheDenseLayer) {
  constexpr size_t rows = 7;
  // 13 inputs to 17 outputs; and qkv's shape, 3 blocks of 3 heads of 2.
  for (const LinearCase c : {LinearCase{13, 1, 17, 1}, LinearCase{12, 3, 3, 2}}) {
    const size_t out = c.blocks * c.units * c.unit;
    const DenseLinear dense(c.in, out, rows, 11);
    for (int size : {1, 2, 3}) {
      onGroup(size, false, [&](const TensorGroup& g) {
        MemoryAccount account;
        ColumnParallelLinear layer(c.in, c.blocks, c.units, c.unit, true, g, account);
        const size_t mine = layer.outFeatures();
        std::vector<float> params(layer.paramCount()), grads(params.size());
        ASSERT_EQ(params.size(), layer.shareCount(g.rank));
        layer.fromTwin(dense.params, params);
        layer.bind(params, grads);
        // Local output j is dense output row(j): block by block, this rank's units.
        const Share s = shareOf(c.units, size, g.rank);
        const auto row = [&](size_t j) {
          const size_t per = s.count * c.unit;
          return j / per * c.units * c.unit + s.first * c.unit + j % per;
        };
        std::vector<float> y(rows * mine), dy(rows * mine), dx(rows * c.in);
        layer.forward(dense.x, y, rows);
        for (size_t r = 0; r < rows; ++r) {
          for (size_t j = 0; j < mine; ++j) {
            const size_t o = row(j);
            double absSum = std::fabs(static_cast<double>(dense.params[c.in * out + o]));
            for (size_t k = 0; k < c.in; ++k) absSum += std::fabs(static_cast<double>(dense.x[r * c.in + k]) * static_cast<double>(dense.params[o * c.in + k]));
            EXPECT_NEAR(y[r * mine + j], dense.y[r * out + o], reorderBound(c.in + 1, absSum)) << "row " << r << " output " << j;
            dy[r * mine + j] = dense.dy[r * out + o];
          }
        }
        layer.backward(dy, dx, rows);
        for (size_t j = 0; j < mine; ++j) {
          for (size_t k = 0; k < c.in; ++k) EXPECT_EQ(grads[j * c.in + k], dense.grads[row(j) * c.in + k]);
          EXPECT_EQ(grads[c.in * mine + j], dense.grads[c.in * out + row(j)]);
        }
        // dL/dx: every rank's outputs' part, summed over the group: a reordered sum of `out` products.
        for (size_t r = 0; r < rows; ++r) {
          for (size_t k = 0; k < c.in; ++k) {
            double absSum = 0;
            for (size_t o = 0; o < out; ++o) absSum += std::fabs(static_cast<double>(dense.dy[r * out + o]) * static_cast<double>(dense.params[o * c.in + k]));
            EXPECT_NEAR(dx[r * c.in + k], dense.dx[r * c.in + k], reorderBound(out, absSum));
          }
        }
        // Back into the twin's layout, every rank's share.
        std::vector<float> twin(dense.params.size(), 0.0f);
        layer.toTwin(g.rank, params, twin);
        for (size_t j = 0; j < mine; ++j) EXPECT_EQ(twin[row(j) * c.in], dense.params[row(j) * c.in]);
      });
    }
  }
}

TEST(TensorParallel, RowParallelLinearIsTheDenseLayerWithinTheReorderingBound) {
  constexpr size_t rows = 7;
  for (const LinearCase c : {LinearCase{0, 1, 13, 1}, LinearCase{0, 1, 3, 2}}) {
    const size_t in = c.units * c.unit, out = c.units == 13 ? 17 : 5;
    const DenseLinear dense(in, out, rows, 23);
    for (int size : {1, 2, 3}) {
      onGroup(size, false, [&](const TensorGroup& g) {
        MemoryAccount account;
        RowParallelLinear layer(c.units, c.unit, out, true, g, account);
        const size_t mine = layer.inFeatures();
        const size_t first = shareOf(c.units, size, g.rank).first * c.unit;
        std::vector<float> params(layer.paramCount()), grads(params.size());
        layer.fromTwin(dense.params, params);
        layer.bind(params, grads);
        std::vector<float> x(rows * mine), y(rows * out), dx(rows * mine);
        for (size_t r = 0; r < rows; ++r) std::copy_n(dense.x.data() + r * in + first, mine, x.data() + r * mine);
        layer.forward(x, y, rows);
        for (size_t r = 0; r < rows; ++r) {
          for (size_t o = 0; o < out; ++o) {
            double absSum = std::fabs(static_cast<double>(dense.params[in * out + o]));
            for (size_t k = 0; k < in; ++k) absSum += std::fabs(static_cast<double>(dense.x[r * in + k]) * static_cast<double>(dense.params[o * in + k]));
            EXPECT_NEAR(y[r * out + o], dense.y[r * out + o], reorderBound(in + 1, absSum)) << r << " " << o;
          }
        }
        layer.backward(dense.dy, dx, rows);
        // dW and dL/dx are sums over the same terms as the dense layer's (rows; outputs): the bound covers any order.
        for (size_t o = 0; o < out; ++o) {
          for (size_t k = 0; k < mine; ++k) {
            double absSum = 0;
            for (size_t r = 0; r < rows; ++r) absSum += std::fabs(static_cast<double>(dense.dy[r * out + o]) * static_cast<double>(dense.x[r * in + first + k]));
            EXPECT_NEAR(grads[o * mine + k], dense.grads[o * in + first + k], reorderBound(rows, absSum));
          }
          EXPECT_EQ(grads[mine * out + o], dense.grads[in * out + o]);  // the bias: the same rows in order
        }
        for (size_t r = 0; r < rows; ++r) {
          for (size_t k = 0; k < mine; ++k) {
            double absSum = 0;
            for (size_t o = 0; o < out; ++o) absSum += std::fabs(static_cast<double>(dense.dy[r * out + o]) * static_cast<double>(dense.params[o * in + first + k]));
            EXPECT_NEAR(dx[r * mine + k], dense.dx[r * in + first + k], reorderBound(out, absSum));
          }
        }
      });
    }
  }
}

TEST(TensorParallel, VocabParallelEmbeddingIsBitwiseTheDenseEmbedding) {
  constexpr size_t vocab = 11, context = 4, channels = 5, rows = 8;
  Embedding dense(vocab, context, channels);
  std::vector<float> params = randomFloats((vocab + context) * channels, 5), grads(params.size());
  dense.bind(params, grads);
  std::vector<float> tokens(rows), y(rows * channels), dy = randomFloats(rows * channels, 6), none;
  for (size_t r = 0; r < rows; ++r) tokens[r] = static_cast<float>((r * 7 + 3) % vocab);
  dense.forward(tokens, y, rows);
  dense.backward(dy, none, rows);
  for (bool sequence : {false, true}) {
    for (int size : {1, 2, 4}) {
      onGroup(size, sequence, [&](const TensorGroup& g) {
        MemoryAccount account;
        VocabParallelEmbedding layer(vocab, context, channels, g, account);
        std::vector<float> mine(layer.paramCount()), mineGrads(mine.size());
        layer.fromTwin(params, mine);
        layer.bind(mine, mineGrads);
        const size_t out = layer.outRows(rows), first = sequence ? out * static_cast<size_t>(g.rank) : 0;
        std::vector<float> ly(out * channels);
        layer.forward(tokens, ly, rows);
        for (size_t i = 0; i < ly.size(); ++i) EXPECT_EQ(ly[i], y[first * channels + i]) << i;
        layer.backward(std::span<const float>(dy).subspan(first * channels, out * channels), none, rows);
        std::vector<float> twin(grads.size(), -1.0f);
        layer.toTwin(g.rank, mineGrads, twin);
        const Share s = shareOf(vocab, size, g.rank);
        for (size_t i = 0; i < twin.size(); ++i) {
          const bool held = i >= vocab * channels || (i / channels >= s.first && i / channels < s.first + s.count);
          if (held) {
            EXPECT_EQ(twin[i], grads[i]) << i;
          }
        }
      });
    }
  }
}

TEST(TensorParallel, VocabParallelCrossEntropyIsTheFullOneWithinRounding) {
  constexpr size_t rows = 7, classes = 13;
  const std::vector<float> logits = randomFloats(rows * classes, 9, 4.0f);
  std::vector<int32_t> targets(rows);
  for (size_t r = 0; r < rows; ++r) targets[r] = static_cast<int32_t>((r * 5 + 2) % classes);
  std::vector<float> dense(logits.size());
  const double loss = crossEntropy(logits, targets, rows, classes, dense);
  for (int size : {1, 2, 3, 4}) {
    onGroup(size, false, [&](const TensorGroup& g) {
      const Share s = shareOf(classes, size, g.rank);
      std::vector<float> mine(rows * s.count), dmine(mine.size());
      for (size_t r = 0; r < rows; ++r) std::copy_n(logits.data() + r * classes + s.first, s.count, mine.data() + r * s.count);
      const double parallel = crossEntropy(mine, targets, rows, classes, g, dmine);
      // Each row sums 13 exponentials in another order: a relative error
      // of at most 2 x 13 u in the sum, the same in its logarithm.
      EXPECT_NEAR(parallel, loss, 2 * classes * kUnit * 4);
      for (size_t r = 0; r < rows; ++r) {
        for (size_t j = 0; j < s.count; ++j) {
          EXPECT_NEAR(dmine[r * s.count + j], dense[r * classes + s.first + j], 2 * classes * kUnit);
        }
      }
    });
  }
  onGroup(2, false, [&](const TensorGroup& g) {
    std::vector<float> mine(rows * 7), dmine(mine.size());
    std::vector<int32_t> bad = targets;
    bad[3] = 13;
    EXPECT_THROW(crossEntropy(mine, bad, rows, classes, g, dmine), std::invalid_argument);
  });
}

// A whole GPT (embedding, one block of attention and MLP, the head) split
// over T ranks, against the dense model: the loss, and every parameter's
// gradient gathered back into the dense layout. Errors start as reordered
// sums (at most 4 x 16 terms: a relative 2 x 64 u = 8e-6 of the terms'
// magnitudes) and pass through a few layers; the gradients are held to
// 1e-5 of the largest, the loss to 1e-5 relative.
TEST(TensorParallel, AGptIsTheDenseOneWithinTolerance) {
  for (const bool sequence : {false, true}) {
    const GptShape shape{.vocab = 11, .context = 4, .dim = 12, .heads = sequence ? 4u : 3u, .layers = 1};
    constexpr size_t rows = 8;  // two sequences
    MemoryAccount account;
    Model dense(account);
    buildGpt(dense, shape);
    dense.init(3);
    std::vector<float> tokens(rows), dlogits(rows * shape.vocab);
    std::vector<int32_t> targets(rows);
    for (size_t r = 0; r < rows; ++r) {
      tokens[r] = static_cast<float>((r * 3 + 1) % shape.vocab);
      targets[r] = static_cast<int32_t>((r * 5 + 4) % shape.vocab);
    }
    const auto logits = dense.forward(tokens, rows);
    const double loss = crossEntropy(logits, targets, rows, shape.vocab, dlogits);
    dense.backward(dlogits, rows);
    const std::vector<float> denseGrads(dense.grads().begin(), dense.grads().end());
    float largest = 0;
    for (float v : denseGrads) largest = std::max(largest, std::fabs(v));
    for (int size : sequence ? std::vector<int>{2, 4} : std::vector<int>{2, 3}) {
      onGroup(size, sequence, [&](const TensorGroup& g) {
        MemoryAccount mine;
        Model tp(mine);
        buildGpt(tp, shape, true, &g);
        ASSERT_EQ(tp.layers(), dense.layers());
        for (size_t i = 0; i < tp.layers(); ++i) {
          tp.layer(i).fromTwin(dense.params().subspan(dense.slices()[i].offset, dense.slices()[i].count),
                               tp.params().subspan(tp.slices()[i].offset, tp.slices()[i].count));
        }
        const auto local = tp.forward(tokens, rows);
        std::vector<float> dlocal(local.size());
        const double parallel = crossEntropy(local, targets, rows, shape.vocab, g, dlocal);
        EXPECT_NEAR(parallel, loss, 1e-5 * loss) << size << " ranks, sequence parallel " << sequence;
        tp.backward(dlocal, rows);
        // Every rank's gradients, gathered into the dense layout.
        size_t most = 0;
        for (int r = 0; r < size; ++r) {
          size_t n = 0;
          for (size_t i = 0; i < tp.layers(); ++i) n += tp.layer(i).shareCount(r);
          most = std::max(most, n);
        }
        std::vector<float> share(most), all(most * static_cast<size_t>(size)), twin(denseGrads.size());
        std::copy(tp.grads().begin(), tp.grads().end(), share.begin());
        g.comm->allGather(std::span<const float>(share), std::span(all));
        for (int r = 0; r < size; ++r) {
          size_t at = static_cast<size_t>(r) * most;
          for (size_t i = 0; i < tp.layers(); ++i) {
            const size_t n = tp.layer(i).shareCount(r);
            tp.layer(i).toTwin(r, std::span<const float>(all).subspan(at, n),
                               std::span(twin).subspan(dense.slices()[i].offset, dense.slices()[i].count));
            at += n;
          }
        }
        for (size_t i = 0; i < twin.size(); ++i) {
          EXPECT_NEAR(twin[i], denseGrads[i], 1e-5 * static_cast<double>(largest)) << "parameter " << i << ", " << size << " ranks";
        }
      });
    }
  }
}

}  // namespace
