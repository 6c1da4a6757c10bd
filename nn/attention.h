#pragma once
// Attention: scaled_dot_product_attention (the function, as
// torch.nn.functional's), multi-head causal self-attention, and the
// pre-norm transformer block GPT-style models stack.
#include "nn/layers.h"

namespace trainrun {
namespace nn {

// softmax(q k^T * scale + mask) v over the last two dims; q [..., L, E],
// k [..., S, E], v [..., S, Ev]. attn_mask: bool (true = may attend) or
// float (added), broadcastable to [..., L, S]. is_causal: position i attends
// to positions <= i. scale: 1/sqrt(E) when <= 0.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                                    bool is_causal = false, double scale = 0.0);

// x [B, T, C] -> [B, T, C]; one Linear for q, k and v ("qkv"), one out ("proj").
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t d_model, int64_t num_heads);
  Tensor forward(const Tensor& x) override;
  int64_t d_model, num_heads;

 private:
  std::shared_ptr<Linear> qkv_, proj_;  // also registered as children "qkv", "proj"
};

// x + attn(ln_1(x)), then + mlp(ln_2(x)) with a 4x GELU MLP ("fc", "proj").
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t d_model, int64_t num_heads);
  Tensor forward(const Tensor& x) override;

 private:
  // Also registered as children "ln_1", "attn", "ln_2", "mlp".
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<Sequential> mlp_;
};

}  // namespace nn
}  // namespace trainrun
