// Autograd kernels of the reductions: sum, mean, prod, amax/amin and
// max/min along a dim, var, norm, logsumexp and cumsum. Ties (amax, norm
// with p = inf) share the gradient evenly, as PyTorch does.
#include <cmath>
#include <tuple>

#include "autograd/functions/record.h"
#include "tensor/op_schemas.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

using DimsSig = ops::amax::Sig;
using MaxDimSig = ops::max_dim::Sig;

Tensor sum_like_autograd(bool mean, const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  static const auto& sum_op = ops::sum::handle();
  static const auto& mean_op = ops::mean::handle();
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
OpKernel<ops::sum> reg_sum(DispatchKey::Autograd, &sum_autograd);
OpKernel<ops::mean> reg_mean(DispatchKey::Autograd, &mean_autograd);

// prod: d/dx_i = prod of the others. Where x_i == 0 that is not result / x_i:
// it is the product of the other elements when x_i is the only zero of its
// slice, and 0 when there are more.
Tensor prod_autograd(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  static const auto& op = ops::prod::handle();
  IntList shape = x.sizes();
  DType xd = x.dtype();
  return record(
      "ProdBackward", {x}, {x}, true, [&] { return op.call(keys_of(x), x, dims, keepdim, dtype); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor &v = s[0], &r = s[1];
        Tensor ge = expand_reduced(g, shape, dims, keepdim), re = expand_reduced(r, shape, dims, keepdim);
        Tensor is_zero = eq(v, 0);
        if (!any(is_zero).item<bool>()) return {cast_to(mul(ge, div(re, v)), xd)};
        Tensor others = prod(where(is_zero, ones_like(v), v), dims, true);
        Tensor zero_count = sum(is_zero, dims, true);
        Tensor at_zero = where(eq(zero_count, 1), others, zeros_like(others));
        Tensor d = where(is_zero, expand(at_zero, shape), div(re, where(is_zero, ones_like(v), v)));
        return {cast_to(mul(ge, d), xd)};
      });
}
OpKernel<ops::prod> reg_prod(DispatchKey::Autograd, &prod_autograd);

// amax/amin: the gradient is split evenly between the elements that tie for
// the extreme.
Tensor extreme_autograd(const Op<DimsSig>& op, const char* node, const Tensor& x, const IntList& dims, bool keepdim) {
  IntList shape = x.sizes();
  DType xd = x.dtype();
  return record(
      node, {x}, {x}, true, [&] { return op.call(keys_of(x), x, dims, keepdim); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        Tensor hit = eq(s[0], expand_reduced(s[1], shape, dims, keepdim)).to(g.dtype());
        Tensor share = div(hit, sum(hit, dims, true));
        return {cast_to(mul(expand_reduced(g, shape, dims, keepdim), share), xd)};
      });
}
Tensor amax_autograd(const Tensor& x, const IntList& dims, bool keepdim) {
  static const auto& op = ops::amax::handle();
  return extreme_autograd(op, "AmaxBackward", x, dims, keepdim);
}
Tensor amin_autograd(const Tensor& x, const IntList& dims, bool keepdim) {
  static const auto& op = ops::amin::handle();
  return extreme_autograd(op, "AminBackward", x, dims, keepdim);
}
OpKernel<ops::amax> reg_amax(DispatchKey::Autograd, &amax_autograd);
OpKernel<ops::amin> reg_amin(DispatchKey::Autograd, &amin_autograd);

// max/min along a dim return (values, indices): the gradient goes to the
// element each index picked.
std::tuple<Tensor, Tensor> indexed_extreme_autograd(const Op<MaxDimSig>& op, const char* node, const Tensor& x,
                                                    int64_t dim, bool keepdim) {
  IntList shape = x.sizes();
  DType xd = x.dtype();
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), node);
  // The formula needs the indices, which exist once the forward has run.
  auto indices = std::make_shared<Tensor>();
  Tensor values = record(
      node, {x}, {}, false,
      [&] {
        auto r = op.call(keys_of(x), x, dim, keepdim);
        *indices = std::get<1>(r);
        return std::get<0>(r);
      },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        if (shape.empty()) return {cast_to(g, xd)};
        Tensor gk = keepdim ? g : unsqueeze(g, d), ik = keepdim ? *indices : unsqueeze(*indices, d);
        return {cast_to(scatter(zeros(shape, TensorOptions(g.dtype(), g.device())), d, ik, gk), xd)};
      });
  return {values, *indices};
}
std::tuple<Tensor, Tensor> max_dim_autograd(const Tensor& x, int64_t dim, bool keepdim) {
  static const auto& op = ops::max_dim::handle();
  return indexed_extreme_autograd(op, "MaxBackward", x, dim, keepdim);
}
std::tuple<Tensor, Tensor> min_dim_autograd(const Tensor& x, int64_t dim, bool keepdim) {
  static const auto& op = ops::min_dim::handle();
  return indexed_extreme_autograd(op, "MinBackward", x, dim, keepdim);
}
OpKernel<ops::max_dim> reg_max_dim(DispatchKey::Autograd, &max_dim_autograd);
OpKernel<ops::min_dim> reg_min_dim(DispatchKey::Autograd, &min_dim_autograd);

// var = sum((x - mean)^2) / (N - correction).
Tensor var_autograd(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  static const auto& op = ops::var::handle();
  IntList shape = x.sizes();
  DType xd = x.dtype();
  return record(
      "VarBackward", {x}, {x}, false, [&] { return op.call(keys_of(x), x, dims, correction, keepdim); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const double scale = 2.0 / static_cast<double>(reduced_count(shape, dims) - correction);
        Tensor centered = sub(s[0], mean(s[0], dims, true));
        return {cast_to(mul(expand_reduced(g, shape, dims, keepdim), mul(centered, scale)), xd)};
      });
}
OpKernel<ops::var> reg_var(DispatchKey::Autograd, &var_autograd);

// p-norm: d/dx = x |x|^(p-2) / norm^(p-1); 0 where the norm is 0 (as
// PyTorch's subgradient); p = inf splits between the elements of largest |x|.
Tensor norm_autograd(const Tensor& x, double p, const IntList& dims, bool keepdim) {
  static const auto& op = ops::norm::handle();
  IntList shape = x.sizes();
  DType xd = x.dtype();
  return record(
      "NormBackward", {x}, {x}, true, [&] { return op.call(keys_of(x), x, p, dims, keepdim); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor& v = s[0];
        Tensor ge = expand_reduced(g, shape, dims, keepdim), re = expand_reduced(s[1], shape, dims, keepdim);
        Tensor d;
        if (p == 0) {
          d = zeros_like(v);
        } else if (p == 1) {
          d = sign(v);
        } else if (std::isinf(p)) {
          Tensor hit = eq(abs(v), re).to(v.dtype());
          d = mul(sign(v), div(hit, sum(hit, dims, true)));
        } else {
          Tensor safe = where(eq(re, 0), ones_like(re), re);
          Tensor num = p == 2 ? v : mul(v, pow(abs(v), p - 2));
          d = where(eq(re, 0), zeros_like(v), div(num, p == 2 ? safe : pow(safe, p - 1)));
        }
        return {cast_to(mul(ge, d), xd)};
      });
}
OpKernel<ops::norm> reg_norm(DispatchKey::Autograd, &norm_autograd);

// logsumexp: the gradient is softmax(x) along the reduced dims.
Tensor logsumexp_autograd(const Tensor& x, const IntList& dims, bool keepdim) {
  static const auto& op = ops::logsumexp::handle();
  IntList shape = x.sizes();
  DType xd = x.dtype();
  return record(
      "LogsumexpBackward", {x}, {x}, true, [&] { return op.call(keys_of(x), x, dims, keepdim); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        Tensor re = expand_reduced(s[1], shape, dims, keepdim);
        return {cast_to(mul(expand_reduced(g, shape, dims, keepdim), exp(sub(s[0], re))), xd)};
      });
}
OpKernel<ops::logsumexp> reg_logsumexp(DispatchKey::Autograd, &logsumexp_autograd);

// cumsum: element i feeds outputs i.. along the dim, so its gradient is the
// reversed cumulative sum of g: sum(g) - cumsum(g) + g.
Tensor cumsum_autograd(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  static const auto& op = ops::cumsum::handle();
  DType xd = x.dtype();
  return record(
      "CumsumBackward", {x}, {}, false, [&] { return op.call(keys_of(x), x, dim, dtype); },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        if (g.dim() == 0) return {cast_to(g, xd)};
        return {cast_to(add(sub(sum(g, {dim}, true), cumsum(g, dim)), g), xd)};
      });
}
OpKernel<ops::cumsum> reg_cumsum(DispatchKey::Autograd, &cumsum_autograd);

}  // namespace
}  // namespace trainrun
