#include "training/layers/attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace loom::train {

CausalSelfAttention::CausalSelfAttention(size_t channels, size_t heads, size_t context, MemoryAccount& account)
    : channels_(channels), heads_(heads), context_(context), att_(account, Category::Activations) {
  if (heads == 0 || channels % heads != 0) {
    throw std::invalid_argument(std::to_string(heads) + " heads do not divide " + std::to_string(channels) +
                                " channels");
  }
}

void CausalSelfAttention::forward(std::span<const float> x, std::span<float> y, size_t rows) {
  if (rows % context_ != 0) {
    throw std::invalid_argument(std::to_string(rows) + " rows are not whole sequences of " + std::to_string(context_));
  }
  qkv_ = x;
  const size_t T = context_, C = channels_, H = heads_, hs = C / H, B = rows / T;
  att_.resize(B * H * T * T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (size_t b = 0; b < B; ++b) {
    for (size_t t = 0; t < T; ++t) {
      for (size_t h = 0; h < H; ++h) {
        const float* q = x.data() + (b * T + t) * 3 * C + h * hs;
        float* att = att_.data() + ((b * H + h) * T + t) * T;
        float max = -INFINITY;
        for (size_t t2 = 0; t2 <= t; ++t2) {
          const float* k = x.data() + (b * T + t2) * 3 * C + C + h * hs;
          float dot = 0;
          for (size_t i = 0; i < hs; ++i) dot += q[i] * k[i];
          att[t2] = dot * scale;
          max = std::max(max, att[t2]);
        }
        float sum = 0;
        for (size_t t2 = 0; t2 <= t; ++t2) {
          att[t2] = std::exp(att[t2] - max);
          sum += att[t2];
        }
        const float inverse = 1.0f / sum;
        for (size_t t2 = 0; t2 < T; ++t2) att[t2] = t2 <= t ? att[t2] * inverse : 0.0f;
        float* out = y.data() + (b * T + t) * C + h * hs;
        std::fill(out, out + hs, 0.0f);
        for (size_t t2 = 0; t2 <= t; ++t2) {
          const float* v = x.data() + (b * T + t2) * 3 * C + 2 * C + h * hs;
          for (size_t i = 0; i < hs; ++i) out[i] += att[t2] * v[i];
        }
      }
    }
  }
}

void CausalSelfAttention::backward(std::span<const float> dy, std::span<float> dx, size_t rows) {
  if (dx.empty()) return;
  const size_t T = context_, C = channels_, H = heads_, hs = C / H, B = rows / T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::fill(dx.begin(), dx.end(), 0.0f);
  std::vector<float> datt(T);
  for (size_t b = 0; b < B; ++b) {
    for (size_t t = 0; t < T; ++t) {
      for (size_t h = 0; h < H; ++h) {
        const float* att = att_.data() + ((b * H + h) * T + t) * T;
        const float* dout = dy.data() + (b * T + t) * C + h * hs;
        const float* q = qkv_.data() + (b * T + t) * 3 * C + h * hs;
        float* dq = dx.data() + (b * T + t) * 3 * C + h * hs;
        // Through the weighted sum of v: datt[t2] = dout . v[t2], dv[t2] += att[t2] dout.
        for (size_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv_.data() + (b * T + t2) * 3 * C + 2 * C + h * hs;
          float* dv = dx.data() + (b * T + t2) * 3 * C + 2 * C + h * hs;
          float d = 0;
          for (size_t i = 0; i < hs; ++i) {
            d += v[i] * dout[i];
            dv[i] += att[t2] * dout[i];
          }
          datt[t2] = d;
        }
        // Through the softmax: dpre[t2] = att[t2] (datt[t2] - sum att datt), then the scaled dot product.
        float weighted = 0;
        for (size_t t2 = 0; t2 <= t; ++t2) weighted += att[t2] * datt[t2];
        for (size_t t2 = 0; t2 <= t; ++t2) {
          const float dpre = att[t2] * (datt[t2] - weighted) * scale;
          const float* k = qkv_.data() + (b * T + t2) * 3 * C + C + h * hs;
          float* dk = dx.data() + (b * T + t2) * 3 * C + C + h * hs;
          for (size_t i = 0; i < hs; ++i) {
            dq[i] += dpre * k[i];
            dk[i] += dpre * q[i];
          }
        }
      }
    }
  }
}

}  // namespace loom::train
