// The CUDA kernels of sort / topk (CUB segmented sort of rows), conv2d and
// its backward (im2col + cuBLAS GEMMs + col2im), and the 2-D pools,
// registered under DispatchKey::CUDA with the CPU's argument checks
// (tensor/nn_shapes.h).
#include <tuple>

#include "tensor/cuda/elementwise_launch.h"
#include "tensor/cuda/kernel_geometry.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/indexing.h"
#include "tensor/linalg.h"
#include "tensor/op_schemas.h"
#include "tensor/reductions.h"
#include "tensor/views.h"

namespace trainrun::cuda {
namespace {

CUstream_st* stream_of(const Tensor& t) { return current_stream(t.device().index).handle(); }

// Sorts each row along dim; returns values and positions, first k of each row.
// The dtype keys are sorted in: smaller integers widen to int32 and 16-bit
// floats to float32 (exact, and order-preserving).
DType sort_key_dtype(DType dt) {
  switch (dt) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16: return DType::Int32;
    case DType::Float16:
    case DType::BFloat16: return DType::Float32;
    default: return dt;
  }
}

std::tuple<Tensor, Tensor> sort_rows(const Tensor& x_in, int64_t dim, int64_t k, bool descending, const char* op) {
  const Tensor x = x_in.to(sort_key_dtype(x_in.dtype()));
  Tensor rows = contiguous(transpose(x, dim, -1));
  const int64_t n = rows.size(-1);
  const int64_t nrows = n == 0 ? 0 : rows.numel() / n;
  const TensorOptions on(x.dtype(), x.device());
  Tensor keys = empty(rows.sizes(), on);
  Tensor positions = empty(rows.sizes(), TensorOptions(DType::Int64, x.device()));
  if (nrows > 0) {
    DeviceGuard guard(x.device().index);
    Tensor iota = contiguous(expand(arange(n, TensorOptions(DType::Int64, x.device())), {nrows, n}));
    Tensor offsets = mul(arange(nrows + 1, TensorOptions(DType::Int64, x.device())), scalar_tensor(n)).to(DType::Int32);
    size_t temp_bytes = 0;
    check_launch(launch_sort_rows(x.dtype(), descending, rows.data_ptr(), keys.data_ptr(), iota.data<int64_t>(),
                                  positions.data<int64_t>(), nrows, n, offsets.data<int32_t>(), nullptr, &temp_bytes,
                                  stream_of(x)),
                 op);
    Tensor temp = empty({static_cast<int64_t>(temp_bytes) + 1}, TensorOptions(DType::UInt8, x.device()));
    check_launch(launch_sort_rows(x.dtype(), descending, rows.data_ptr(), keys.data_ptr(), iota.data<int64_t>(),
                                  positions.data<int64_t>(), nrows, n, offsets.data<int32_t>(), temp.data_ptr(),
                                  &temp_bytes, stream_of(x)),
                 op);
  }
  if (k < n) {
    keys = contiguous(keys.narrow(-1, 0, k));
    positions = contiguous(positions.narrow(-1, 0, k));
  }
  return {contiguous(transpose(keys, dim, -1)).to(x_in.dtype()), contiguous(transpose(positions, dim, -1))};
}

std::tuple<Tensor, Tensor> sort_cuda(const Tensor& x, int64_t dim, bool descending, bool /*stable*/) {
  if (x.dim() == 0) return {clone(x), zeros({}, TensorOptions(DType::Int64, x.device()))};
  dim = wrap_dim(dim, x.dim(), "sort");
  return sort_rows(x, dim, x.size(dim), descending, "sort");
}

std::tuple<Tensor, Tensor> topk_cuda(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  if (x.dim() == 0) {
    TR_CHECK(k == 0 || k == 1, IndexError, "topk: k ({}) is out of range for a 0-dim tensor", k);
    return {clone(x), zeros({}, TensorOptions(DType::Int64, x.device()))};
  }
  dim = wrap_dim(dim, x.dim(), "topk");
  TR_CHECK(k >= 0 && k <= x.size(dim), IndexError, "topk: k ({}) is out of range for dim {} of size {} (shape {})", k,
           dim, x.size(dim), x.shape_str());
  // A full sort, then the first k: O(n log n) where a radix select would be O(n).
  return sort_rows(x, dim, k, largest, "topk");
}

// [N, C*kH*kW, Ho*Wo] columns of the (batched, contiguous) input.
Tensor im2col(const Tensor& x, const ConvArgs& a) {
  Tensor cols = empty({a.N, a.C * a.kH * a.kW, a.Ho * a.Wo}, TensorOptions(x.dtype(), x.device()));
  DeviceGuard guard(x.device().index);
  check_launch(launch_im2col(x.dtype(), x.data_ptr(), cols.data_ptr(), conv_geometry(a), stream_of(x)), "conv2d");
  return cols;
}

Tensor conv2d_cuda(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
                   const IntList& padding, const IntList& dilation, int64_t groups) {
  const ConvArgs a = check_conv_args("conv2d", input, weight, stride, padding, dilation, groups);
  if (bias.defined())
    TR_CHECK(bias.dim() == 1 && bias.size(0) == a.O, ValueError, "conv2d: bias of shape {} must be [{}]",
             bias.shape_str(), a.O);
  Tensor x = contiguous(a.batched ? input : input.unsqueeze(0));
  Tensor cols = im2col(x, a);  // [N, C*kk, L]
  const int64_t kk = a.kH * a.kW, Og = a.O / a.groups;
  std::vector<Tensor> outs;
  for (int64_t g = 0; g < a.groups; ++g) {
    Tensor w = weight.narrow(0, g * Og, Og).reshape({Og, a.Cg * kk});
    Tensor c = a.groups == 1 ? cols : cols.narrow(1, g * a.Cg * kk, a.Cg * kk);
    outs.push_back(matmul(w, c));  // [N, Og, L]
  }
  Tensor out = (a.groups == 1 ? outs[0] : cat(outs, 1)).reshape({a.N, a.O, a.Ho, a.Wo});
  if (bias.defined()) out = add(out, bias.to(out.dtype()).reshape({1, a.O, 1, 1}));
  return a.batched ? contiguous(out) : contiguous(out.squeeze(0));
}

std::tuple<Tensor, Tensor, Tensor> conv2d_backward_cuda(const Tensor& grad_out_in, const Tensor& input,
                                                        const Tensor& weight, const IntList& stride,
                                                        const IntList& padding, const IntList& dilation, int64_t groups,
                                                        bool need_input, bool need_weight, bool need_bias) {
  const ConvArgs a = check_conv_args("conv2d_backward", input, weight, stride, padding, dilation, groups);
  const IntList out_shape = a.batched ? IntList{a.N, a.O, a.Ho, a.Wo} : IntList{a.O, a.Ho, a.Wo};
  TR_CHECK(grad_out_in.sizes() == out_shape, ValueError,
           "conv2d_backward: grad_output has shape {} but the convolution's output has [{}]", grad_out_in.shape_str(),
           fmt::join(out_shape, ", "));
  Tensor gy = contiguous(grad_out_in.to(input.dtype())).reshape({a.N, a.O, a.Ho * a.Wo});
  const int64_t kk = a.kH * a.kW, Og = a.O / a.groups;
  Tensor grad_input, grad_weight, grad_bias;
  if (need_weight) {
    Tensor cols = im2col(contiguous(a.batched ? input : input.unsqueeze(0)), a);
    std::vector<Tensor> parts;
    for (int64_t g = 0; g < a.groups; ++g) {
      Tensor gyg = gy.narrow(1, g * Og, Og);                                           // [N, Og, L]
      Tensor cg = a.groups == 1 ? cols : cols.narrow(1, g * a.Cg * kk, a.Cg * kk);   // [N, Cg*kk, L]
      parts.push_back(sum(matmul(gyg, transpose(cg, 1, 2)), {0}));                   // [Og, Cg*kk]
    }
    grad_weight = (a.groups == 1 ? parts[0] : cat(parts, 0)).reshape(weight.sizes()).contiguous();
  }
  if (need_input) {
    std::vector<Tensor> parts;
    for (int64_t g = 0; g < a.groups; ++g) {
      Tensor wg = weight.narrow(0, g * Og, Og).reshape({Og, a.Cg * kk});
      parts.push_back(matmul(transpose(wg, 0, 1), gy.narrow(1, g * Og, Og)));  // [N, Cg*kk, L]
    }
    Tensor cols = contiguous(a.groups == 1 ? parts[0] : cat(parts, 1));
    grad_input = empty({a.N, a.C, a.H, a.W}, TensorOptions(input.dtype(), input.device()));
    DeviceGuard guard(input.device().index);
    check_launch(launch_col2im(input.dtype(), cols.data_ptr(), grad_input.data_ptr(), conv_geometry(a),
                               stream_of(input)),
                 "conv2d_backward");
    if (!a.batched) grad_input = grad_input.squeeze(0);
  }
  if (need_bias) grad_bias = sum(gy, {0, 2});
  return {grad_input, grad_weight, grad_bias};
}

std::tuple<Tensor, Tensor> max_pool2d_cuda(const Tensor& x_in, const IntList& k, const IntList& s, const IntList& p,
                                           const IntList& d, bool ceil_mode) {
  PoolGeometry g = pool_geometry(x_in, k, s, p, d, ceil_mode, "max_pool2d");
  TR_CHECK(x_in.dtype() != DType::Bool, TypeError, "max_pool2d: not supported for bool tensors");
  Tensor x = contiguous(x_in);
  Tensor out = empty(g.out_shape, TensorOptions(x.dtype(), x.device()));
  Tensor idx = empty(g.out_shape, TensorOptions(DType::Int64, x.device()));
  DeviceGuard guard(x.device().index);
  check_launch(launch_max_pool2d(x.dtype(), x.data_ptr(), out.data_ptr(), idx.data<int64_t>(), pool_args(g, false),
                                 stream_of(x)),
               "max_pool2d");
  return {out, idx};
}

Tensor avg_pool2d_cuda(const Tensor& x_in, const IntList& k, const IntList& s, const IntList& p, bool ceil_mode,
                       bool count_include_pad) {
  PoolGeometry g = pool_geometry(x_in, k, s, p, {1, 1}, ceil_mode, "avg_pool2d");
  Tensor x = contiguous(x_in);
  Tensor out = empty(g.out_shape, TensorOptions(x.dtype(), x.device()));
  DeviceGuard guard(x.device().index);
  check_launch(launch_avg_pool2d(x.dtype(), x.data_ptr(), out.data_ptr(), pool_args(g, count_include_pad),
                                 stream_of(x)),
               "avg_pool2d");
  return out;
}

Tensor avg_pool2d_backward_cuda(const Tensor& grad_in, const Tensor& x, const IntList& k, const IntList& s,
                                const IntList& p, bool ceil_mode, bool count_include_pad) {
  PoolGeometry g = pool_geometry(x, k, s, p, {1, 1}, ceil_mode, "avg_pool2d_backward");
  TR_CHECK(grad_in.sizes() == g.out_shape, ValueError,
           "avg_pool2d_backward: the output gradient has shape {} but the pooled output has [{}]", grad_in.shape_str(),
           fmt::join(g.out_shape, ", "));
  Tensor go = contiguous(grad_in.to(x.dtype()));
  Tensor result = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
  DeviceGuard guard(x.device().index);
  check_launch(launch_avg_pool2d_backward(x.dtype(), go.data_ptr(), result.data_ptr(), pool_args(g, count_include_pad),
                                          stream_of(x)),
               "avg_pool2d_backward");
  return result;
}

OpKernel<ops::sort> reg_sort(DispatchKey::CUDA, &sort_cuda);
OpKernel<ops::topk> reg_topk(DispatchKey::CUDA, &topk_cuda);
OpKernel<ops::conv2d> reg_conv2d(DispatchKey::CUDA, &conv2d_cuda);
OpKernel<ops::conv2d_backward> reg_conv2d_backward(DispatchKey::CUDA, &conv2d_backward_cuda);
OpKernel<ops::max_pool2d> reg_max_pool2d(DispatchKey::CUDA, &max_pool2d_cuda);
OpKernel<ops::avg_pool2d> reg_avg_pool2d(DispatchKey::CUDA, &avg_pool2d_cuda);
OpKernel<ops::avg_pool2d_backward> reg_avg_pool2d_backward(DispatchKey::CUDA, &avg_pool2d_backward_cuda);

}  // namespace
}  // namespace trainrun::cuda
