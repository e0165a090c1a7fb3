#include "training/layers/attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "training/math/exp.hpp"
#include "training/math/gemm.hpp"
#include "training/math/vector_loops.hpp"

namespace loom::train {

// Per sequence b and head h, Q, K and V are T x hs matrices inside the qkv
// rows (row stride 3C), so every product is one GEMM on strided matrices:
//   forward   S = Q K^T / sqrt(hs), A = causal softmax(S), O = A V
//   backward  dA = dO V^T, dV = A^T dO, dS = A . (dA - rowsum(A . dA)) / sqrt(hs),
//             dQ = dS K, dK = dS^T Q
// A is zero above the diagonal, so the masked products add nothing.

CausalSelfAttention::CausalSelfAttention(size_t channels, size_t heads, size_t context, MemoryAccount& account)
    : channels_(channels), heads_(heads), context_(context), att_(account, Category::Activations),
      scratch_(account, Category::Activations) {
  if (heads == 0 || channels % heads != 0) {
    throw std::invalid_argument(std::to_string(heads) + " heads do not divide " + std::to_string(channels) +
                                " channels");
  }
}

namespace {

// One head's T x T scores, scaled, made the causal softmax of each row in
// place (row t keeps columns 0..t, the rest 0).
LOOM_VECTOR_LOOPS void causalSoftmax(float* att, size_t T, float scale) {
  for (size_t t = 0; t < T; ++t) {
    float* row = att + t * T;
    float max = -INFINITY;
    for (size_t t2 = 0; t2 <= t; ++t2) max = std::max(max, row[t2] * scale);
    for (size_t t2 = 0; t2 <= t; ++t2) row[t2] = expFloat(row[t2] * scale - max);  // vectorizes
    float sum = 0;
    for (size_t t2 = 0; t2 <= t; ++t2) sum += row[t2];  // in order
    const float inverse = 1.0f / sum;
    for (size_t t2 = 0; t2 < T; ++t2) row[t2] = t2 <= t ? row[t2] * inverse : 0.0f;
  }
}

// dL/dA (ds, in place) into dL/d(scores): each row through the softmax's Jacobian, scaled.
LOOM_VECTOR_LOOPS void causalSoftmaxBackward(const float* att, float* ds, size_t T, float scale) {
  for (size_t t = 0; t < T; ++t) {
    const float* a = att + t * T;
    float* d = ds + t * T;
    float weighted = 0;
    for (size_t t2 = 0; t2 <= t; ++t2) weighted += a[t2] * d[t2];
    for (size_t t2 = 0; t2 < T; ++t2) d[t2] = t2 <= t ? a[t2] * (d[t2] - weighted) * scale : 0.0f;
  }
}

}  // namespace

void CausalSelfAttention::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  if (rows % context_ != 0) {
    throw std::invalid_argument(std::to_string(rows) + " rows are not whole sequences of " + std::to_string(context_));
  }
  qkv_ = x;
  const size_t T = context_, C = channels_, H = heads_, hs = C / H, B = rows / T;
  att_.resize(B * H * T * T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < H; ++h) {
      const float* q = x.data() + b * T * 3 * C + h * hs;
      float* att = att_.data() + (b * H + h) * T * T;
      gemm(Transpose::No, Transpose::Yes, T, T, hs, q, q + C, att, {3 * C, 3 * C, T});
      causalSoftmax(att, T, scale);
      gemm(Transpose::No, Transpose::No, T, hs, T, att, q + 2 * C, y.data() + b * T * C + h * hs, {T, 3 * C, C});
    }
  }
}

void CausalSelfAttention::backward(std::span<const float> dy, std::span<float> dx, size_t rows) {
  if (dx.empty()) return;
  const size_t T = context_, C = channels_, H = heads_, hs = C / H, B = rows / T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  scratch_.resize(T * T);
  float* ds = scratch_.data();
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < H; ++h) {
      const float* q = qkv_.data() + b * T * 3 * C + h * hs;
      const float* att = att_.data() + (b * H + h) * T * T;
      const float* dout = dy.data() + b * T * C + h * hs;
      float* dq = dx.data() + b * T * 3 * C + h * hs;
      gemm(Transpose::No, Transpose::Yes, T, T, hs, dout, q + 2 * C, ds, {C, 3 * C, T});    // dA
      gemm(Transpose::Yes, Transpose::No, T, hs, T, att, dout, dq + 2 * C, {T, C, 3 * C});  // dV
      causalSoftmaxBackward(att, ds, T, scale);
      gemm(Transpose::No, Transpose::No, T, hs, T, ds, q + C, dq, {T, 3 * C, 3 * C});       // dQ
      gemm(Transpose::Yes, Transpose::No, T, hs, T, ds, q, dq + C, {T, 3 * C, 3 * C});      // dK
    }
  }
}

}  // namespace loom::train
