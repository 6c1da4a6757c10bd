// Meta kernels of the ops that are not elementwise: each works out its
// result's shape and dtype with the same checked geometry as the CPU kernel
// (ReducePlan, check_norm, check_conv_args, pool_geometry) and allocates it
// on the meta device. Ops whose result size depends on the data
// (masked_select, nonzero) cannot run on meta tensors and say so.
#include <string>
#include <tuple>

#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/linalg.h"
#include "tensor/nn_shapes.h"
#include "tensor/op_schemas.h"
#include "tensor/reduce_plan.h"

namespace trainrun {
namespace {

Tensor meta_empty(const IntList& shape, DType dtype) {
  return empty(shape, TensorOptions(dtype, Device(DeviceType::Meta)));
}

// ---- reductions -------------------------------------------------------------------------------------------------

Tensor reduced(const Tensor& x, const IntList& dims, bool keepdim, const char* op, DType dtype) {
  return meta_empty(ReducePlan(x, dims, keepdim, op).out_shape, dtype);
}

template <bool mean>
Tensor sum_meta(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  const DType out = sum_dtype(x.dtype(), dtype);
  TR_CHECK(!mean || is_floating(out), Error,
           "mean(): could not infer output dtype. Input dtype must be either a "
           "floating point or complex dtype. Got: {}",
           dtype_name(out));
  return reduced(x, dims, keepdim, mean ? "mean" : "sum", out);
}

Tensor prod_meta(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return reduced(x, dims, keepdim, "prod", sum_dtype(x.dtype(), dtype));
}

template <bool is_max>
Tensor amax_meta(const Tensor& x, const IntList& dims, bool keepdim) {
  const char* op = is_max ? "amax" : "amin";
  ReducePlan plan(x, dims, keepdim, op);
  check_nonempty(plan, op);
  return meta_empty(plan.out_shape, x.dtype());
}

template <bool is_max>
std::tuple<Tensor, Tensor> max_dim_meta(const Tensor& x, int64_t dim, bool keepdim) {
  const char* op = is_max ? "max" : "min";
  ReducePlan plan(x, {dim}, keepdim, op);
  check_nonempty(plan, op);
  return {meta_empty(plan.out_shape, x.dtype()), meta_empty(plan.out_shape, DType::Int64)};
}

template <bool is_max>
Tensor argmax_meta(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  const char* op = is_max ? "argmax" : "argmin";
  ReducePlan plan(dim ? x : x.reshape({-1}), dim ? IntList{*dim} : IntList{}, keepdim && dim.has_value(), op);
  check_nonempty(plan, op);
  return meta_empty(!dim && keepdim ? IntList(x.dim(), 1) : plan.out_shape, DType::Int64);
}

Tensor floating_reduction(const Tensor& x, const IntList& dims, bool keepdim, const char* op) {
  TR_CHECK(is_floating(x.dtype()), TypeError, "{}: expected a floating point tensor, got {}", op,
           dtype_name(x.dtype()));
  return reduced(x, dims, keepdim, op, x.dtype());
}

Tensor var_meta(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  (void)correction;
  return floating_reduction(x, dims, keepdim, "var");
}

Tensor norm_meta(const Tensor& x, double p, const IntList& dims, bool keepdim) {
  (void)p;
  return floating_reduction(x, dims, keepdim, "norm");
}

Tensor logsumexp_meta(const Tensor& x, const IntList& dims, bool keepdim) {
  return reduced(x, dims, keepdim, "logsumexp", is_floating(x.dtype()) ? x.dtype() : default_float_dtype());
}

template <bool all>
Tensor all_meta(const Tensor& x, const IntList& dims, bool keepdim) {
  return reduced(x, dims, keepdim, all ? "all" : "any", DType::Bool);
}

Tensor cumsum_meta(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  if (x.dim() > 0) wrap_dim(dim, x.dim(), "cumsum");
  return meta_empty(x.sizes(), sum_dtype(x.dtype(), dtype));
}

// ---- matrix products (the checks every device's kernel runs) -------------------------------------------------------

Tensor mm_meta(const Tensor& a, const Tensor& b, const Tensor& out) {
  check_mm(a, b, "mm");
  return out.defined() ? out : meta_empty({a.size(0), b.size(1)}, a.dtype());  // mm_out checked out's shape
}

Tensor addmm_meta(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_mm(a, b, "addmm");
  (void)self, (void)beta, (void)alpha;
  return meta_empty({a.size(0), b.size(1)}, a.dtype());
}

Tensor addmm_activation_meta(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                             const Scalar& alpha, bool use_gelu) {
  (void)self, (void)beta, (void)alpha, (void)use_gelu;
  check_mm(a, b, "_addmm_activation");
  return meta_empty({a.size(0), b.size(1)}, a.dtype());
}

Tensor baddbmm_meta(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_bmm(a, b);
  (void)self, (void)beta, (void)alpha;
  return meta_empty({a.size(0), a.size(1), b.size(2)}, a.dtype());
}

// ---- indexing --------------------------------------------------------------------------------------------------

Tensor index_select_meta(const Tensor& x, int64_t dim, const Tensor& index) {
  TR_CHECK(index.dim() <= 1, ValueError, "index_select: index must be 0-D or 1-D, got shape {}", index.shape_str());
  IntList shape = x.sizes();
  if (x.dim() > 0) shape[wrap_dim(dim, x.dim(), "index_select")] = index.numel();
  return meta_empty(shape, x.dtype());
}

Tensor gather_meta(const Tensor& x, int64_t dim, const Tensor& index) {
  if (x.dim() > 0) wrap_dim(dim, x.dim(), "gather");
  return meta_empty(index.sizes(), x.dtype());
}

Tensor scatter_meta(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, int64_t mode) {
  (void)index, (void)src, (void)mode;
  if (x.dim() > 0) wrap_dim(dim, x.dim(), "scatter");
  return meta_empty(x.sizes(), x.dtype());
}

Tensor index_add_meta(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const Scalar& alpha) {
  (void)alpha;
  dim = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "index_add");
  TR_CHECK(index.dim() == 1, ValueError, "index_add: index must be 1-D, got shape {}", index.shape_str());
  TR_CHECK(src.dim() == x.dim() && (x.dim() == 0 || src.size(dim) == index.numel()), ValueError,
           "index_add: source of shape {} does not match self {} with {} indices along dim {}", src.shape_str(),
           x.shape_str(), index.numel(), dim);
  return meta_empty(x.sizes(), x.dtype());
}

[[noreturn]] void data_dependent(const char* op) {
  throw NotImplementedError(fmt::format(
      "{}: cannot run on meta tensors: the size of its result depends on the data, which a meta tensor does not have",
      op));
}
Tensor masked_select_meta(const Tensor&, const Tensor&) { data_dependent("masked_select"); }
Tensor nonzero_meta(const Tensor&) { data_dependent("nonzero"); }

std::tuple<Tensor, Tensor> sort_meta(const Tensor& x, int64_t dim, bool descending, bool stable) {
  (void)descending, (void)stable;
  if (x.dim() > 0) wrap_dim(dim, x.dim(), "sort");
  return {meta_empty(x.sizes(), x.dtype()), meta_empty(x.sizes(), DType::Int64)};
}

std::tuple<Tensor, Tensor> topk_meta(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)largest, (void)sorted;
  IntList shape = x.sizes();
  if (x.dim() == 0) {
    TR_CHECK(k == 0 || k == 1, IndexError, "topk: k ({}) is out of range for a 0-dim tensor", k);
  } else {
    dim = wrap_dim(dim, x.dim(), "topk");
    TR_CHECK(k >= 0 && k <= x.size(dim), IndexError, "topk: k ({}) is out of range for dim {} of size {} (shape {})", k,
             dim, x.size(dim), x.shape_str());
    shape[dim] = k;
  }
  return {meta_empty(shape, x.dtype()), meta_empty(shape, DType::Int64)};
}

// ---- neural-network ops ----------------------------------------------------------------------------------------

template <bool log_output>
Tensor softmax_meta(const Tensor& x, int64_t dim) {
  if (x.dim() > 0) wrap_dim(dim, x.dim(), log_output ? "log_softmax" : "softmax");
  return meta_empty(x.sizes(), is_floating(x.dtype()) ? x.dtype() : default_float_dtype());
}

template <bool rms>
std::tuple<Tensor, Tensor, Tensor> norm_layer_meta(const Tensor& x, const IntList& normalized_shape,
                                                   const Tensor& weight, const Tensor& bias, double eps) {
  (void)eps;
  const NormShape s = check_norm(x, normalized_shape, weight, bias, rms ? "rms_norm" : "layer_norm");
  return {meta_empty(x.sizes(), x.dtype()), meta_empty(s.stat_shape, x.dtype()), meta_empty(s.stat_shape, x.dtype())};
}

Tensor conv2d_meta(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
                   const IntList& padding, const IntList& dilation, int64_t groups) {
  const ConvArgs a = check_conv_args("conv2d", input, weight, stride, padding, dilation, groups);
  if (bias.defined())
    TR_CHECK(bias.dim() == 1 && bias.size(0) == a.O, ValueError, "conv2d: bias of shape {} must be [{}]",
             bias.shape_str(), a.O);
  return meta_empty(a.batched ? IntList{a.N, a.O, a.Ho, a.Wo} : IntList{a.O, a.Ho, a.Wo}, input.dtype());
}

std::tuple<Tensor, Tensor, Tensor> conv2d_backward_meta(const Tensor& grad_out, const Tensor& input,
                                                        const Tensor& weight, const IntList& stride,
                                                        const IntList& padding, const IntList& dilation, int64_t groups,
                                                        bool need_input, bool need_weight, bool need_bias) {
  const ConvArgs a = check_conv_args("conv2d_backward", input, weight, stride, padding, dilation, groups);
  const IntList out_shape = a.batched ? IntList{a.N, a.O, a.Ho, a.Wo} : IntList{a.O, a.Ho, a.Wo};
  TR_CHECK(grad_out.sizes() == out_shape, ValueError,
           "conv2d_backward: grad_output has shape {} but the convolution's output is [{}]", grad_out.shape_str(),
           fmt::join(out_shape, ", "));
  const DType dt = input.dtype();
  return {need_input ? meta_empty(input.sizes(), dt) : Tensor(),
          need_weight ? meta_empty(weight.sizes(), dt) : Tensor(), need_bias ? meta_empty({a.O}, dt) : Tensor()};
}

std::tuple<Tensor, Tensor> max_pool2d_meta(const Tensor& x, const IntList& k, const IntList& s, const IntList& p,
                                           const IntList& d, bool ceil_mode) {
  const PoolGeometry g = pool_geometry(x, k, s, p, d, ceil_mode, "max_pool2d");
  return {meta_empty(g.out_shape, x.dtype()), meta_empty(g.out_shape, DType::Int64)};
}

Tensor avg_pool2d_meta(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, bool ceil_mode,
                       bool count_include_pad) {
  (void)count_include_pad;
  return meta_empty(pool_geometry(x, k, s, p, {1, 1}, ceil_mode, "avg_pool2d").out_shape, x.dtype());
}

Tensor avg_pool2d_backward_meta(const Tensor& grad_out, const Tensor& x, const IntList& k, const IntList& s,
                                const IntList& p, bool ceil_mode, bool count_include_pad) {
  (void)grad_out, (void)k, (void)s, (void)p, (void)ceil_mode, (void)count_include_pad;
  return meta_empty(x.sizes(), x.dtype());
}

OpKernel<ops::sum> reg_sum(DispatchKey::Meta, &sum_meta<false>);
OpKernel<ops::mean> reg_mean(DispatchKey::Meta, &sum_meta<true>);
OpKernel<ops::prod> reg_prod(DispatchKey::Meta, &prod_meta);
OpKernel<ops::amax> reg_amax(DispatchKey::Meta, &amax_meta<true>);
OpKernel<ops::amin> reg_amin(DispatchKey::Meta, &amax_meta<false>);
OpKernel<ops::max_dim> reg_max_dim(DispatchKey::Meta, &max_dim_meta<true>);
OpKernel<ops::min_dim> reg_min_dim(DispatchKey::Meta, &max_dim_meta<false>);
OpKernel<ops::argmax> reg_argmax(DispatchKey::Meta, &argmax_meta<true>);
OpKernel<ops::argmin> reg_argmin(DispatchKey::Meta, &argmax_meta<false>);
OpKernel<ops::var> reg_var(DispatchKey::Meta, &var_meta);
OpKernel<ops::norm> reg_norm(DispatchKey::Meta, &norm_meta);
OpKernel<ops::logsumexp> reg_logsumexp(DispatchKey::Meta, &logsumexp_meta);
OpKernel<ops::all> reg_all(DispatchKey::Meta, &all_meta<true>);
OpKernel<ops::any> reg_any(DispatchKey::Meta, &all_meta<false>);
OpKernel<ops::cumsum> reg_cumsum(DispatchKey::Meta, &cumsum_meta);
OpKernel<ops::mm> reg_mm(DispatchKey::Meta, &mm_meta);
OpKernel<ops::addmm> reg_addmm(DispatchKey::Meta, &addmm_meta);
OpKernel<ops::_addmm_activation> reg_addmm_activation(DispatchKey::Meta, &addmm_activation_meta);
OpKernel<ops::baddbmm> reg_baddbmm(DispatchKey::Meta, &baddbmm_meta);
OpKernel<ops::index_select> reg_index_select(DispatchKey::Meta, &index_select_meta);
OpKernel<ops::gather> reg_gather(DispatchKey::Meta, &gather_meta);
OpKernel<ops::scatter> reg_scatter(DispatchKey::Meta, &scatter_meta);
OpKernel<ops::index_add> reg_index_add(DispatchKey::Meta, &index_add_meta);
OpKernel<ops::masked_select> reg_masked_select(DispatchKey::Meta, &masked_select_meta);
OpKernel<ops::nonzero> reg_nonzero(DispatchKey::Meta, &nonzero_meta);
OpKernel<ops::sort> reg_sort(DispatchKey::Meta, &sort_meta);
OpKernel<ops::topk> reg_topk(DispatchKey::Meta, &topk_meta);
OpKernel<ops::softmax> reg_softmax(DispatchKey::Meta, &softmax_meta<false>);
OpKernel<ops::log_softmax> reg_log_softmax(DispatchKey::Meta, &softmax_meta<true>);
OpKernel<ops::layer_norm> reg_layer_norm(DispatchKey::Meta, &norm_layer_meta<false>);
OpKernel<ops::rms_norm> reg_rms_norm(DispatchKey::Meta, &norm_layer_meta<true>);
OpKernel<ops::conv2d> reg_conv2d(DispatchKey::Meta, &conv2d_meta);
OpKernel<ops::conv2d_backward> reg_conv2d_backward(DispatchKey::Meta, &conv2d_backward_meta);
OpKernel<ops::max_pool2d> reg_max_pool2d(DispatchKey::Meta, &max_pool2d_meta);
OpKernel<ops::avg_pool2d> reg_avg_pool2d(DispatchKey::Meta, &avg_pool2d_meta);
OpKernel<ops::avg_pool2d_backward> reg_avg_pool2d_backward(DispatchKey::Meta, &avg_pool2d_backward_meta);

}  // namespace
}  // namespace trainrun
