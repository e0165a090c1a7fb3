// The tiny GPT of the character-level sample (GPT-2's shape, Radford et al.
// 2019, at toy size): token and position embeddings; `layers` blocks of
// x + attn(ln1(x)) and x + mlp(ln2(x)), where attn is a linear layer to q, k
// and v, causal self-attention and a linear projection, and mlp a linear
// layer to 4 x dim, GELU (tanh) and a projection back; a final layer norm;
// a linear head to the vocabulary without bias, tied to the token embedding
// (GPT-2's) or not.
// Parameters in that order: wte, wpe, then per block ln1 (weight, bias),
// qkv (weight, bias), proj, ln2, fc, fc proj, then lnf and the head.
#pragma once

#include "training/layers/tensor_group.hpp"
#include "training/model.hpp"

namespace loom::train {

struct GptShape {
  size_t vocab = 0;
  size_t context = 64;  // T
  size_t dim = 128;     // C
  size_t heads = 4;
  size_t layers = 4;
  bool tied = false;      // the head's weight is wte (Model::tie)
  bool recompute = false;  // each block's branches recompute their activations in backward (residual.hpp)
};

// allocate = false leaves the model unallocated (Model::build): a pipeline
// builds one per activation stash and takes its chunk's layers.
// With a tensor group (size > 1): Megatron's tensor-parallel twin of the
// same model, layer for layer (vocab-parallel embedding, qkv column-parallel
// by heads, attention over this rank's heads, row-parallel projections, a
// column-parallel head whose logits are this rank's share of the vocabulary).
void buildGpt(Model& model, const GptShape& shape, bool allocate = true, const TensorGroup* tensor = nullptr);

}  // namespace loom::train
