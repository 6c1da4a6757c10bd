// The CUDA kernels of the reductions, registered under DispatchKey::CUDA: the
// same ReducePlan as the CPU lays the input out as [outer, inner] rows on the
// GPU, and kernels/reduce_kernels.cu reduces each row.
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "tensor/cuda/elementwise_launch.h"
#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/reduce_plan.h"
#include "tensor/views.h"

namespace trainrun::cuda {
namespace {

// Reduces plan's rows into out (and indices), on the rows' GPU.
void run(ReduceKind kind, const ReducePlan& plan, const Tensor& out, const char* op, double scale = 1.0,
         double p = 2.0, int64_t correction = 1, int64_t* indices = nullptr) {
  RowReduceArgs args;
  args.in = plan.rows.data_ptr();
  args.out = out.data_ptr();
  args.indices = indices;
  args.outer = plan.outer;
  args.inner = plan.inner;
  args.scale = scale;
  args.p = p;
  args.correction = correction;
  const int device = plan.rows.device().index;
  DeviceGuard guard(device);
  // Freed when this returns, after the launch: the caching allocator reuses
  // it only for later work on this stream.
  Tensor scratch;
  if (const size_t bytes = row_reduce_scratch_bytes(plan.outer, plan.inner); bytes > 0) {
    scratch = empty({static_cast<int64_t>(bytes)}, TensorOptions(DType::UInt8, plan.rows.device()));
    args.scratch = scratch.data_ptr();
  }
  check_launch(launch_row_reduce(kind, plan.rows.dtype(), args, current_stream(device).handle()), op);
}

TensorOptions on(const Tensor& x, DType dt) { return TensorOptions(dt, x.device()); }

Tensor sum_like_cuda(const Tensor& x_in, const IntList& dims, bool keepdim, std::optional<DType> dtype, bool mean,
                     bool prod) {
  const char* op = prod ? "prod" : mean ? "mean" : "sum";
  DType out_dtype = sum_dtype(x_in.dtype(), dtype);
  TR_CHECK(!mean || is_floating(out_dtype), Error,
           "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
           "Got: {}",
           dtype_name(out_dtype));
  TR_CHECK(out_dtype != DType::Bool, TypeError, "{}: bool output dtype is not supported", op);
  // A requested dtype is also the accumulation dtype, as in PyTorch; integer
  // inputs accumulate in int64 in the kernel itself.
  Tensor x = dtype && *dtype != x_in.dtype() ? x_in.to(*dtype) : x_in;
  ReducePlan plan(x, dims, keepdim, op);
  Tensor out = empty(plan.out_shape, on(x, out_dtype));
  double scale = mean ? 1.0 / static_cast<double>(plan.inner) : 1.0;
  if (mean && plan.inner == 0) scale = std::numeric_limits<double>::quiet_NaN();
  run(prod ? ReduceKind::Prod : ReduceKind::Sum, plan, out, op, scale);
  return out;
}

Tensor sum_cuda(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_like_cuda(x, dims, keepdim, dtype, false, false);
}
Tensor mean_cuda(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_like_cuda(x, dims, keepdim, dtype, true, false);
}
Tensor prod_cuda(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  // prod of integers is int64 like sum, computed from int64 input.
  DType out_dtype = sum_dtype(x.dtype(), dtype);
  return sum_like_cuda(x.dtype() != out_dtype ? x.to(out_dtype) : x, dims, keepdim, std::nullopt, false, true);
}

template <bool is_max>
Tensor amax_cuda(const Tensor& x, const IntList& dims, bool keepdim) {
  const char* op = is_max ? "amax" : "amin";
  ReducePlan plan(x, dims, keepdim, op);
  check_nonempty(plan, op);
  Tensor out = empty(plan.out_shape, on(x, x.dtype()));
  run(is_max ? ReduceKind::Max : ReduceKind::Min, plan, out, op);
  return out;
}

template <bool is_max>
std::tuple<Tensor, Tensor> max_dim_cuda(const Tensor& x, int64_t dim, bool keepdim) {
  const char* op = is_max ? "max" : "min";
  ReducePlan plan(x, {dim}, keepdim, op);
  check_nonempty(plan, op);
  Tensor values = empty(plan.out_shape, on(x, x.dtype()));
  Tensor indices = empty(plan.out_shape, on(x, DType::Int64));
  run(is_max ? ReduceKind::Max : ReduceKind::Min, plan, values, op, 1.0, 2.0, 1, indices.data<int64_t>());
  return {values, indices};
}

template <bool is_max>
Tensor argmax_cuda(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  const char* op = is_max ? "argmax" : "argmin";
  Tensor src = dim ? x : reshape(x, {-1});
  ReducePlan plan(src, dim ? IntList{*dim} : IntList{}, keepdim && dim.has_value(), op);
  check_nonempty(plan, op);
  IntList shape = plan.out_shape;
  if (!dim && keepdim) shape = IntList(x.dim(), 1);
  Tensor out = empty(shape, on(x, DType::Int64));
  run(is_max ? ReduceKind::ArgMax : ReduceKind::ArgMin, plan, out, op);
  return out;
}

Tensor var_cuda(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  TR_CHECK(is_floating(x.dtype()), TypeError, "var: expected a floating point tensor, got {}", dtype_name(x.dtype()));
  ReducePlan plan(x, dims, keepdim, "var");
  Tensor out = empty(plan.out_shape, on(x, x.dtype()));
  run(ReduceKind::Var, plan, out, "var", 1.0, 2.0, correction);
  return out;
}

Tensor norm_cuda(const Tensor& x, double p, const IntList& dims, bool keepdim) {
  TR_CHECK(is_floating(x.dtype()), TypeError, "norm: expected a floating point tensor, got {}", dtype_name(x.dtype()));
  ReducePlan plan(x, dims, keepdim, "norm");
  Tensor out = empty(plan.out_shape, on(x, x.dtype()));
  ReduceKind kind = std::isinf(p) ? (p > 0 ? ReduceKind::NormInf : ReduceKind::NormNegInf)
                    : p == 0      ? ReduceKind::Norm0
                    : p == 1      ? ReduceKind::Norm1
                    : p == 2      ? ReduceKind::Norm2
                                  : ReduceKind::NormP;
  run(kind, plan, out, "norm", 1.0, p);
  return out;
}

Tensor logsumexp_cuda(const Tensor& x_in, const IntList& dims, bool keepdim) {
  Tensor x = is_floating(x_in.dtype()) ? x_in : x_in.to(default_float_dtype());
  ReducePlan plan(x, dims, keepdim, "logsumexp");
  Tensor out = empty(plan.out_shape, on(x, x.dtype()));
  run(ReduceKind::LogSumExp, plan, out, "logsumexp");
  return out;
}

template <bool is_all>
Tensor all_cuda(const Tensor& x, const IntList& dims, bool keepdim) {
  const char* op = is_all ? "all" : "any";
  ReducePlan plan(x, dims, keepdim, op);
  Tensor out = empty(plan.out_shape, on(x, DType::Bool));
  run(is_all ? ReduceKind::All : ReduceKind::Any, plan, out, op);
  return out;
}

Tensor cumsum_cuda(const Tensor& x_in, int64_t dim, std::optional<DType> dtype) {
  DType out_dtype = sum_dtype(x_in.dtype(), dtype);
  TR_CHECK(out_dtype != DType::Bool, TypeError, "cumsum: bool output dtype is not supported");
  dim = wrap_dim(dim, x_in.dim(), "cumsum");
  Tensor x = x_in.to(out_dtype);
  if (x.dim() == 0) return clone(x);
  Tensor rows = contiguous(transpose(x, dim, -1));
  Tensor result = empty(rows.sizes(), on(x, out_dtype));
  const int64_t inner = rows.size(-1);
  const int64_t outer = inner == 0 ? 0 : rows.numel() / inner;
  const int device = x.device().index;
  DeviceGuard guard(device);
  check_launch(launch_row_cumsum(out_dtype, rows.data_ptr(), result.data_ptr(), outer, inner,
                                 current_stream(device).handle()),
               "cumsum");
  return contiguous(transpose(result, dim, -1));
}

OpKernel<ops::sum> reg_sum(DispatchKey::CUDA, &sum_cuda);
OpKernel<ops::mean> reg_mean(DispatchKey::CUDA, &mean_cuda);
OpKernel<ops::prod> reg_prod(DispatchKey::CUDA, &prod_cuda);
OpKernel<ops::amax> reg_amax(DispatchKey::CUDA, &amax_cuda<true>);
OpKernel<ops::amin> reg_amin(DispatchKey::CUDA, &amax_cuda<false>);
OpKernel<ops::max_dim> reg_max_dim(DispatchKey::CUDA, &max_dim_cuda<true>);
OpKernel<ops::min_dim> reg_min_dim(DispatchKey::CUDA, &max_dim_cuda<false>);
OpKernel<ops::argmax> reg_argmax(DispatchKey::CUDA, &argmax_cuda<true>);
OpKernel<ops::argmin> reg_argmin(DispatchKey::CUDA, &argmax_cuda<false>);
OpKernel<ops::var> reg_var(DispatchKey::CUDA, &var_cuda);
OpKernel<ops::norm> reg_norm(DispatchKey::CUDA, &norm_cuda);
OpKernel<ops::logsumexp> reg_logsumexp(DispatchKey::CUDA, &logsumexp_cuda);
OpKernel<ops::all> reg_all(DispatchKey::CUDA, &all_cuda<true>);
OpKernel<ops::any> reg_any(DispatchKey::CUDA, &all_cuda<false>);
OpKernel<ops::cumsum> reg_cumsum(DispatchKey::CUDA, &cumsum_cuda);

}  // namespace
}  // namespace trainrun::cuda
