// Autograd kernels of sum/mean and of the BLAS products (mm, addmm,
// baddbmm: matmul, bmm, dot, mv and linear are built from them).
#include <algorithm>

#include "autograd/functions/record.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

using SumSig = Tensor(const Tensor&, const IntList&, bool, std::optional<DType>);
using MmSig = Tensor(const Tensor&, const Tensor&, const Tensor&);
using AddmmSig = Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&);

// g of a reduction over `dims` back to x's shape: re-insert the reduced
// dims (when not kept) and broadcast.
Tensor expand_reduced(const Tensor& g, const IntList& shape, const IntList& dims, bool keepdim) {
  Tensor r = g;
  if (!keepdim) {
    IntList wrapped;
    const int64_t nd = static_cast<int64_t>(shape.size());
    if (dims.empty())
      for (int64_t d = 0; d < nd; ++d) wrapped.push_back(d);
    else
      for (int64_t d : dims) wrapped.push_back(wrap_dim(d, nd, "sum backward"));
    std::sort(wrapped.begin(), wrapped.end());
    for (int64_t d : wrapped) r = unsqueeze(r, d);
  }
  return expand(r, shape);
}

int64_t reduced_count(const IntList& shape, const IntList& dims) {
  int64_t n = 1;
  if (dims.empty()) {
    for (int64_t s : shape) n *= s;
  } else {
    for (int64_t d : dims) n *= shape[wrap_dim(d, static_cast<int64_t>(shape.size()), "mean backward")];
  }
  return n;
}

Tensor sum_like_autograd(bool mean, const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  static Op<SumSig> sum_op("sum"), mean_op("mean");
  IntList shape = x.sizes();
  DType xd = x.dtype();
  return record(
      mean ? "MeanBackward" : "SumBackward", {x}, {}, false,
      [&] { return (mean ? mean_op : sum_op).call(keys_of(x), x, dims, keepdim, dtype); },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        Tensor r = expand_reduced(g, shape, dims, keepdim);
        if (mean) r = div(r, static_cast<double>(reduced_count(shape, dims)));
        return {cast_to(r, xd)};
      });
}
Tensor sum_autograd(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_like_autograd(false, x, dims, keepdim, dtype);
}
Tensor mean_autograd(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_like_autograd(true, x, dims, keepdim, dtype);
}
KernelRegistration<SumSig> reg_sum("sum", DispatchKey::Autograd, &sum_autograd);
KernelRegistration<SumSig> reg_mean("mean", DispatchKey::Autograd, &mean_autograd);

// A matrix stored transposed (a t() of a contiguous one).
bool column_major(const Tensor& m) {
  return m.dim() == 2 && m.size(0) > 1 && m.size(1) > 1 && m.stride(0) == 1 && m.stride(1) == m.size(0);
}

Tensor mm_autograd(const Tensor& a, const Tensor& b, const Tensor& out) {
  static Op<MmSig> op("mm");
  check_out_allowed("mm", out, {a, b});
  return record(
      "MmBackward", {a, b}, {a, b}, false, [&] { return op.call(keys_of(a, b, out), a, b, out); },
      [](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor &a = s[0], &b = s[1];
        // Each gradient comes out with its input's layout (as PyTorch's do):
        // Linear's weight enters as a transposed view, and a gradient laid
        // out the same way becomes contiguous again once the view is undone.
        Tensor ga = column_major(a) ? t(mm(b, t(g))) : mm(g, t(b));
        Tensor gb = column_major(b) ? t(mm(t(g), a)) : mm(t(a), g);
        return {cast_to(ga, a.dtype()), cast_to(gb, b.dtype())};
      });
}
KernelRegistration<MmSig> reg_mm("mm", DispatchKey::Autograd, &mm_autograd);

// beta * self + alpha * (a @ b), for matrices (addmm) or batches (baddbmm).
Tensor addmm_like_autograd(bool batched, const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                           const Scalar& alpha) {
  static Op<AddmmSig> addmm_op("addmm"), baddbmm_op("baddbmm");
  const double be = beta.to_double(), al = alpha.to_double();
  IntList self_shape = self.defined() ? self.sizes() : IntList{};
  const bool has_self = self.defined();
  return record(
      batched ? "BaddbmmBackward" : "AddmmBackward", {self, a, b}, {a, b}, false,
      [&] { return (batched ? baddbmm_op : addmm_op).call(keys_of(self, a, b), self, a, b, beta, alpha); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor &x = s[0], &y = s[1];
        Tensor gself = has_self && be != 0 ? sum_to(be == 1 ? g : mul(g, be), self_shape) : Tensor();
        Tensor ga = batched ? bmm(g, transpose(y, 1, 2)) : mm(g, t(y));
        Tensor gb = batched ? bmm(transpose(x, 1, 2), g) : mm(t(x), g);
        if (al != 1) {
          ga = mul(ga, al);
          gb = mul(gb, al);
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
KernelRegistration<AddmmSig> reg_addmm("addmm", DispatchKey::Autograd, &addmm_autograd);
KernelRegistration<AddmmSig> reg_baddbmm("baddbmm", DispatchKey::Autograd, &baddbmm_autograd);

}  // namespace
}  // namespace trainrun
