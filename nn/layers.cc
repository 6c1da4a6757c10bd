#include "nn/layers.h"

#include <cmath>

#include "autograd/variable.h"
#include "nn/init.h"
#include "tensor/ops.h"

namespace trainrun {
namespace nn {

Linear::Linear(int64_t in, int64_t out, bool bias)
    : Module("Linear"), in_features(in), out_features(out), has_bias(bias) {
  TR_CHECK(in > 0 && out > 0, ValueError, "Linear: in_features ({}) and out_features ({}) must be positive", in, out);
  // PyTorch's reset_parameters: kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(in), 1/sqrt(in)).
  Tensor w = empty({out, in}, parameter_options());
  init::kaiming_uniform_(w, std::sqrt(5.0));
  register_parameter("weight", w);
  if (bias) {
    Tensor b = empty({out}, parameter_options());
    double bound = 1.0 / std::sqrt(static_cast<double>(in));
    init::uniform_(b, -bound, bound);
    register_parameter("bias", b);
  }
}

Tensor Linear::forward(const Tensor& x) {
  TR_CHECK(x.dim() >= 1 && x.size(-1) == in_features, ValueError,
           "Linear({}, {}): input of shape {} does not end in {}", in_features, out_features, x.shape_str(),
           in_features);
  Tensor w_t = t(param("weight"));
  if (!has_bias) return matmul(x, w_t);
  // The bias goes in as GEMM's C (one pass fewer than matmul + add); inputs
  // with batch dims fold into rows first, as PyTorch's linear does.
  if (x.dim() == 2) return addmm(param("bias"), x, w_t);
  if (x.dim() > 2 && x.is_contiguous()) {
    IntList out_shape = x.sizes();
    out_shape.back() = out_features;
    return reshape(addmm(param("bias"), reshape(x, {-1, in_features}), w_t), out_shape);
  }
  return add(matmul(x, w_t), param("bias"));
}

Embedding::Embedding(int64_t n, int64_t dim) : Module("Embedding") {
  Tensor w = empty({n, dim}, parameter_options());
  init::normal_(w, 0.0, 1.0);
  register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(param("weight"), indices); }

LayerNorm::LayerNorm(IntList shape, double eps_, bool affine)
    : Module("LayerNorm"), normalized_shape(std::move(shape)), eps(eps_), elementwise_affine(affine) {
  if (affine) {
    register_parameter("weight", ones(normalized_shape, parameter_options()));
    register_parameter("bias", zeros(normalized_shape, parameter_options()));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  if (!elementwise_affine) return std::get<0>(layer_norm(x, normalized_shape, Tensor(), Tensor(), eps));
  return std::get<0>(layer_norm(x, normalized_shape, param("weight"), param("bias"), eps));
}

RMSNorm::RMSNorm(IntList shape, double eps_) : Module("RMSNorm"), normalized_shape(std::move(shape)), eps(eps_) {
  register_parameter("weight", ones(normalized_shape, parameter_options()));
}

Tensor RMSNorm::forward(const Tensor& x) { return std::get<0>(rms_norm(x, normalized_shape, param("weight"), eps)); }

Dropout::Dropout(double p_) : Module("Dropout"), p(p_) {
  TR_CHECK(p >= 0 && p <= 1, ValueError, "Dropout: p must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p == 0) return x;
  if (p == 1) return mul(x, 0.0);
  // The mask is data, not part of the graph: only the multiply is.
  Tensor mask = dropout_mask(x.sizes(), p, nullptr, x.device()).to(x.dtype());
  return mul(x, mul(mask, 1.0 / (1.0 - p)));
}

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim); }
Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& [_, m] : named_children()) h = (*m)(h);
  return h;
}

}  // namespace nn
}  // namespace trainrun
