#include "training/models/gpt.hpp"

#include "training/layers/attention.hpp"
#include "training/layers/embedding.hpp"
#include "training/layers/gelu.hpp"
#include "training/layers/layer_norm.hpp"
#include "training/layers/linear.hpp"
#include "training/layers/residual.hpp"

namespace loom::train {

void buildGpt(Model& model, const GptShape& s, bool allocate) {
  MemoryAccount& account = model.account();
  model.add(std::make_unique<Embedding>(s.vocab, s.context, s.dim));
  for (size_t l = 0; l < s.layers; ++l) {
    Sequence attn(account);
    attn.add(std::make_unique<LayerNorm>(s.dim, account));
    attn.add(std::make_unique<Linear>(s.dim, 3 * s.dim));
    attn.add(std::make_unique<CausalSelfAttention>(s.dim, s.heads, s.context, account));
    attn.add(std::make_unique<Linear>(s.dim, s.dim));
    model.add(std::make_unique<Residual>("attn", std::move(attn)));
    Sequence mlp(account);
    mlp.add(std::make_unique<LayerNorm>(s.dim, account));
    mlp.add(std::make_unique<Linear>(s.dim, 4 * s.dim));
    mlp.add(std::make_unique<Gelu>(4 * s.dim, account));
    mlp.add(std::make_unique<Linear>(4 * s.dim, s.dim));
    model.add(std::make_unique<Residual>("mlp", std::move(mlp)));
  }
  model.add(std::make_unique<LayerNorm>(s.dim, account));
  model.add(std::make_unique<Linear>(s.dim, s.vocab, false));
  model.build(allocate);
}

}  // namespace loom::train
