// Autograd kernels of the BLAS products (mm, addmm, baddbmm: matmul, bmm,
// dot, mv and linear are built from them).
#include "autograd/engine.h"
#include "autograd/functions/record.h"
#include "tensor/op_schemas.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

// A matrix stored transposed (a t() of a contiguous one).
bool column_major(const Tensor& m) {
  return m.dim() == 2 && m.size(0) > 1 && m.size(1) > 1 && m.stride(0) == 1 && m.stride(1) == m.size(0);
}
// A batch of matrices each stored transposed (attention's K^T: a transpose(1, 2) of a contiguous batch).
bool batch_column_major(const Tensor& m) {
  return m.dim() == 3 && m.size(1) > 1 && m.size(2) > 1 && m.stride(1) == 1 && m.stride(2) == m.size(1);
}

// The gradients of a @ b from g. Each comes out with its input's layout (as
// PyTorch's do): Linear's weight enters as a transposed view, and a gradient
// laid out the same way becomes contiguous again once the view is undone
// (so the optimizer's fused update applies and no copy is made).
// Only the gradients asked for are computed (the data fed to a first layer
// needs none).
std::pair<Tensor, Tensor> mm_grads(const Tensor& g, const Tensor& a, const Tensor& b, bool need_a, bool need_b) {
  Tensor ga, gb;
  if (need_a) ga = column_major(a) ? t(mm(b, t(g))) : mm(g, t(b));
  if (need_b) gb = column_major(b) ? t(mm(t(g), a)) : mm(t(a), g);
  return {ga, gb};
}

Tensor mm_autograd(const Tensor& a, const Tensor& b, const Tensor& out) {
  static const auto& op = ops::mm::handle();
  return record_out(
      "MmBackward", out, {a, b}, {a, b}, false,
      [&](const TensorList& in, const Tensor& o) { return op.call(keys_of(in[0], in[1], o), in[0], in[1], o); },
      [need_a = requires_grad(a), need_b = requires_grad(b)](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor &a = s[0], &b = s[1];
        // (an input pass of a split backward leaves the weight's gradient for later: needs_input_grad)
        auto [ga, gb] =
            mm_grads(g, a, b, need_a && autograd::needs_input_grad(0), need_b && autograd::needs_input_grad(1));
        return {cast_to(ga, a.dtype()), cast_to(gb, b.dtype())};
      });
}
OpKernel<ops::mm> reg_mm(DispatchKey::Autograd, &mm_autograd);

// beta * self + alpha * (a @ b), for matrices (addmm) or batches (baddbmm).
Tensor addmm_like_autograd(bool batched, const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                           const Scalar& alpha) {
  static const auto& addmm_op = ops::addmm::handle();
  static const auto& baddbmm_op = ops::baddbmm::handle();
  const double be = beta.to_double(), al = alpha.to_double();
  IntList self_shape = self.defined() ? self.sizes() : IntList{};
  const bool has_self = self.defined(), need_a = requires_grad(a), need_b = requires_grad(b);
  return record(
      batched ? "BaddbmmBackward" : "AddmmBackward", {self, a, b}, {a, b}, false,
      [&] { return (batched ? baddbmm_op : addmm_op).call(keys_of(self, a, b), self, a, b, beta, alpha); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor &x = s[0], &y = s[1];
        const bool want_self = has_self && be != 0 && autograd::needs_input_grad(0);
        const bool want_a = need_a && autograd::needs_input_grad(1), want_b = need_b && autograd::needs_input_grad(2);
        Tensor gself = want_self ? sum_to(be == 1 ? g : mul(g, be), self_shape) : Tensor();
        Tensor ga, gb;
        if (batched) {  // (as mm_grads: each gradient in its input's layout, so K's comes out contiguous)
          if (want_a)
            ga = batch_column_major(x) ? transpose(bmm(y, transpose(g, 1, 2)), 1, 2) : bmm(g, transpose(y, 1, 2));
          if (want_b)
            gb = batch_column_major(y) ? transpose(bmm(transpose(g, 1, 2), x), 1, 2) : bmm(transpose(x, 1, 2), g);
        } else {
          std::tie(ga, gb) = mm_grads(g, x, y, want_a, want_b);
        }
        if (al != 1) {
          if (ga.defined()) ga = mul(ga, al);
          if (gb.defined()) gb = mul(gb, al);
        }
        return {gself, cast_to(ga, x.dtype()), cast_to(gb, y.dtype())};
      });
}
Tensor addmm_autograd(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return addmm_like_autograd(false, self, a, b, beta, alpha);
}
Tensor baddbmm_autograd(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return addmm_like_autograd(true, self, a, b, beta, alpha);
}
OpKernel<ops::addmm> reg_addmm(DispatchKey::Autograd, &addmm_autograd);

// relu/gelu(addmm): when a gradient is wanted, the two ops it stands for, so that their formulas give it (GELU's
// reads the pre-activation, which the fused op never writes); otherwise the fused op itself.
Tensor addmm_activation_autograd(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                                 const Scalar& alpha, bool use_gelu) {
  if (GradMode::is_enabled() && any_requires_grad({self, a, b})) {
    Tensor pre = addmm(self, a, b, beta, alpha);
    return use_gelu ? gelu(pre) : relu(pre);
  }
  ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
  return ops::_addmm_activation::call(keys_of(self, a, b), self, a, b, beta, alpha, use_gelu);
}
OpKernel<ops::_addmm_activation> reg_addmm_activation(DispatchKey::Autograd, &addmm_activation_autograd);
OpKernel<ops::baddbmm> reg_baddbmm(DispatchKey::Autograd, &baddbmm_autograd);

}  // namespace
}  // namespace trainrun
