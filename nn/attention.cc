#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "tensor/ops.h"

namespace trainrun {
namespace nn {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    bool is_causal, double scale) {
  TR_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, ValueError,
           "scaled_dot_product_attention: q, k, v need at least 2 dims, got {}, {}, {}", q.shape_str(), k.shape_str(),
           v.shape_str());
  TR_CHECK(q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2), ValueError,
           "scaled_dot_product_attention: q {} and k {} must share the last dim, k and v {} the sequence dim",
           q.shape_str(), k.shape_str(), v.shape_str());
  TR_CHECK(!(is_causal && attn_mask.defined()), ValueError,
           "scaled_dot_product_attention: pass either attn_mask or is_causal, not both");
  const int64_t L = q.size(-2), S = k.size(-2);
  const double s = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = mul(matmul(q, k.transpose(-2, -1)), s);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    // Row i may see columns j <= i.
    const TensorOptions on(DType::Int64, q.device());
    Tensor rows = unsqueeze(arange(L, on), 1), cols = unsqueeze(arange(S, on), 0);
    scores = where(le(cols, rows), scores, neg_inf);
  } else if (attn_mask.defined()) {
    scores = attn_mask.dtype() == DType::Bool ? where(attn_mask, scores, neg_inf) : add(scores, attn_mask);
  }
  return matmul(softmax(scores, -1), v);
}

CausalSelfAttention::CausalSelfAttention(int64_t d, int64_t h) : Module("CausalSelfAttention"), d_model(d), num_heads(h) {
  TR_CHECK(h > 0 && d % h == 0, ValueError, "CausalSelfAttention: d_model {} is not divisible by num_heads {}", d, h);
  qkv_ = register_module("qkv", std::make_shared<Linear>(d, 3 * d));
  proj_ = register_module("proj", std::make_shared<Linear>(d, d));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  TR_CHECK(x.dim() == 3 && x.size(2) == d_model, ValueError, "CausalSelfAttention: expected [B, T, {}], got {}",
           d_model, x.shape_str());
  const int64_t B = x.size(0), T = x.size(1), hd = d_model / num_heads;
  Tensor qkv = (*qkv_)(x);  // [B, T, 3C]
  auto heads = [&](int64_t i) {           // [B, h, T, hd]
    return permute(reshape(narrow(qkv, 2, i * d_model, d_model), {B, T, num_heads, hd}), {0, 2, 1, 3});
  };
  Tensor y = scaled_dot_product_attention(heads(0), heads(1), heads(2), Tensor(), /*is_causal=*/true);
  y = reshape(permute(y, {0, 2, 1, 3}), {B, T, d_model});
  return (*proj_)(y);
}

TransformerBlock::TransformerBlock(int64_t d, int64_t h) : Module("TransformerBlock") {
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(IntList{d}));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(d, h));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(IntList{d}));
  mlp_ = register_module("mlp", std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
                                    std::make_shared<Linear>(d, 4 * d), std::make_shared<GELU>(),
                                    std::make_shared<Linear>(4 * d, d)}));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor h = add(x, (*attn_)((*ln_1_)(x)));
  return add(h, (*mlp_)((*ln_2_)(h)));
}

}  // namespace nn
}  // namespace trainrun
