#include "training/models/gpt.hpp"

#include <stdexcept>
#include <string>

#include "training/layers/attention.hpp"
#include "training/layers/embedding.hpp"
#include "training/layers/gelu.hpp"
#include "training/layers/layer_norm.hpp"
#include "training/layers/linear.hpp"
#include "training/layers/parallel_embedding.hpp"
#include "training/layers/parallel_linear.hpp"
#include "training/layers/residual.hpp"

namespace loom::train {

namespace {

void buildTensorParallelGpt(Model& model, const GptShape& s, const TensorGroup& g) {
  MemoryAccount& account = model.account();
  if (s.heads == 0 || s.dim % s.heads != 0) {
    throw std::invalid_argument(std::to_string(s.heads) + " heads do not divide " + std::to_string(s.dim) + " channels");
  }
  const size_t hs = s.dim / s.heads, heads = shareOf(s.heads, g.size, g.rank).count;
  if (static_cast<size_t>(g.size) > s.heads) {  // the same on every rank, so that every rank stops saying so
    throw std::invalid_argument("--tp " + std::to_string(g.size) + ": more ranks than the " + std::to_string(s.heads) +
                                " heads to split");
  }
  model.add(std::make_unique<VocabParallelEmbedding>(s.vocab, s.context, s.dim, g, account));
  for (size_t l = 0; l < s.layers; ++l) {
    Sequence attn(account);
    attn.add(std::make_unique<LayerNorm>(s.dim, account, &g));
    attn.add(std::make_unique<ColumnParallelLinear>(s.dim, 3, s.heads, hs, true, g, account));
    attn.add(std::make_unique<CausalSelfAttention>(heads * hs, heads, s.context, account));
    attn.add(std::make_unique<RowParallelLinear>(s.heads, hs, s.dim, true, g, account));
    model.add(std::make_unique<Residual>("attn", std::move(attn), s.recompute));
    Sequence mlp(account);
    mlp.add(std::make_unique<LayerNorm>(s.dim, account, &g));
    mlp.add(std::make_unique<ColumnParallelLinear>(s.dim, 1, 4 * s.dim, 1, true, g, account));
    mlp.add(std::make_unique<Gelu>(shareOf(4 * s.dim, g.size, g.rank).count, account));
    mlp.add(std::make_unique<RowParallelLinear>(4 * s.dim, 1, s.dim, true, g, account));
    model.add(std::make_unique<Residual>("mlp", std::move(mlp), s.recompute));
  }
  model.add(std::make_unique<LayerNorm>(s.dim, account, &g));
  model.add(std::make_unique<ColumnParallelLinear>(s.dim, 1, s.vocab, 1, false, g, account));
}

// The head's weight (vocab x dim, or this rank's rows of it) is the first
// of its parameters, as wte (the same rows) is the embedding's.
void tieHead(Model& model, const GptShape& s) {
  if (!s.tied) return;
  const size_t count = model.layer(0).params().front().count;
  model.tie(model.slices().front().offset, model.slices().back().offset, count);
}

}  // namespace

void buildGpt(Model& model, const GptShape& s, bool allocate, const TensorGroup* tensor) {
  if (tensor != nullptr && tensor->size > 1) {
    buildTensorParallelGpt(model, s, *tensor);
    model.build(allocate);
    tieHead(model, s);
    return;
  }
  MemoryAccount& account = model.account();
  model.add(std::make_unique<Embedding>(s.vocab, s.context, s.dim));
  for (size_t l = 0; l < s.layers; ++l) {
    Sequence attn(account);
    attn.add(std::make_unique<LayerNorm>(s.dim, account));
    attn.add(std::make_unique<Linear>(s.dim, 3 * s.dim));
    attn.add(std::make_unique<CausalSelfAttention>(s.dim, s.heads, s.context, account));
    attn.add(std::make_unique<Linear>(s.dim, s.dim));
    model.add(std::make_unique<Residual>("attn", std::move(attn), s.recompute));
    Sequence mlp(account);
    mlp.add(std::make_unique<LayerNorm>(s.dim, account));
    mlp.add(std::make_unique<Linear>(s.dim, 4 * s.dim));
    mlp.add(std::make_unique<Gelu>(4 * s.dim, account));
    mlp.add(std::make_unique<Linear>(4 * s.dim, s.dim));
    model.add(std::make_unique<Residual>("mlp", std::move(mlp), s.recompute));
  }
  model.add(std::make_unique<LayerNorm>(s.dim, account));
  model.add(std::make_unique<Linear>(s.dim, s.vocab, false));
  model.build(allocate);
  tieHead(model, s);
}

}  // namespace loom::train
