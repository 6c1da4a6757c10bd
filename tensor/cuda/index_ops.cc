// The CUDA kernels of the indexing ops (index_select, gather, scatter,
// index_add, masked_select, nonzero), registered under DispatchKey::CUDA.
// Indices are checked on the device with one reduction, and the error (with
// the offending value) is raised on the host, as the CPU kernels raise it:
// that check, and the sizes of masked_select and nonzero, wait for the GPU.
#include "tensor/cuda/elementwise_launch.h"
#include "tensor/cuda/kernel_geometry.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/indexing.h"
#include "tensor/op_schemas.h"
#include "tensor/reductions.h"
#include "tensor/views.h"

namespace trainrun::cuda {
namespace {

// int64, contiguous, on `device`, in [0, size): a CPU index is copied over
// (as PyTorch allows), negative indices wrap once, anything else out of range
// is an IndexError naming the first bad value.
Tensor checked_index(const Tensor& index_in, Device device, int64_t size, const char* op, int64_t dim) {
  TR_CHECK(index_in.dtype() == DType::Int64 || index_in.dtype() == DType::Int32, TypeError,
           "{}: index must be int64 or int32, got {}", op, dtype_name(index_in.dtype()));
  Tensor index = contiguous(to(index_in, device, DType::Int64));
  if (index.numel() == 0) return index;
  Tensor lo = scalar_tensor(-size, DType::Int64), hi = scalar_tensor(size, DType::Int64);
  Tensor bad = logical_or(lt(index, lo), ge(index, hi));
  if (any(bad, {}, false).item<bool>()) {
    const int64_t first = masked_select(index, bad).cpu().select(0, 0).item<int64_t>();
    throw IndexError(fmt::format("{}: index {} is out of bounds for dim {} with size {}", op, first, dim, size));
  }
  return contiguous(where(lt(index, scalar_tensor(0, DType::Int64)), add(index, hi), index));
}

void check_shapes(const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  TR_CHECK(index.dim() == x.dim() || (x.dim() == 0 && index.dim() <= 1), ValueError,
           "{}: index (shape {}) must have as many dims as the input (shape {})", op, index.shape_str(), x.shape_str());
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d != dim)
      TR_CHECK(index.size(d) <= x.size(d), ValueError, "{}: index shape {} exceeds input shape {} at dim {}", op,
               index.shape_str(), x.shape_str(), d);
    if (src)
      TR_CHECK(index.size(d) <= src->size(d), ValueError, "{}: index shape {} exceeds src shape {} at dim {}", op,
               index.shape_str(), src->shape_str(), d);
  }
}

CUstream_st* stream_of(const Tensor& t) { return current_stream(t.device().index).handle(); }

Tensor index_select_cuda(const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  TR_CHECK(index_in.dim() <= 1, ValueError, "index_select: index must be 0-D or 1-D, got shape {}",
           index_in.shape_str());
  dim = wrap_dim(dim, x_in.dim(), "index_select");
  Tensor x = contiguous(x_in);
  const int64_t size = x.dim() == 0 ? 1 : x.size(dim);
  Tensor index = checked_index(index_in, x.device(), size, "index_select", dim);
  IntList shape = x.sizes();
  if (x.dim() > 0) shape[dim] = index.numel();
  Tensor out = empty(shape, TensorOptions(x.dtype(), x.device()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  DeviceGuard guard(x.device().index);
  check_launch(launch_index_select(x.element_size(), x.data_ptr(), out.data_ptr(), index.data<int64_t>(),
                                   index.numel(), outer, size, inner, stream_of(x)),
               "index_select");
  return out;
}

Tensor gather_cuda(const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  dim = wrap_dim(dim, x_in.dim(), "gather");
  check_shapes(x_in, dim, index_in, nullptr, "gather");
  Tensor x = contiguous(x_in);
  Tensor index = checked_index(index_in, x.device(), x.dim() == 0 ? 1 : x.size(dim), "gather", dim);
  Tensor out = empty(index.sizes(), TensorOptions(x.dtype(), x.device()));
  DeviceGuard guard(x.device().index);
  check_launch(launch_gather(x.element_size(), x.data_ptr(), out.data_ptr(), index.data<int64_t>(), index.numel(),
                             index_geometry(index, x, nullptr, dim), stream_of(x)),
               "gather");
  return out;
}

Tensor scatter_cuda(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src_in, int64_t mode) {
  const bool add = mode == 1;
  const char* op = add ? "scatter_add" : "scatter";
  dim = wrap_dim(dim, x.dim(), op);
  Tensor out = clone(x);
  Tensor src = src_in.dim() == 0 ? expand(src_in.to(x.dtype()), index_in.sizes()) : src_in.to(x.dtype());
  if (!src.is_cuda()) src = src.to(x.device());
  check_shapes(out, dim, index_in, &src, op);
  Tensor index = checked_index(index_in, x.device(), x.dim() == 0 ? 1 : x.size(dim), op, dim);
  DeviceGuard guard(x.device().index);
  check_launch(launch_scatter(x.dtype(), add, out.data_ptr(), src.data_ptr(), index.data<int64_t>(), index.numel(),
                              index_geometry(index, out, &src, dim), stream_of(x)),
               op);
  return out;
}

Tensor index_add_cuda(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src_in,
                      const Scalar& alpha) {
  dim = wrap_dim(dim, x.dim(), "index_add");
  TR_CHECK(index_in.dim() == 1, ValueError, "index_add: index must be 1-D, got shape {}", index_in.shape_str());
  TR_CHECK(src_in.dim() == x.dim() && src_in.size(dim) == index_in.numel(), ValueError,
           "index_add: src of shape {} must match input shape {} with {} entries along dim {}", src_in.shape_str(),
           x.shape_str(), index_in.numel(), dim);
  Tensor out = clone(x);
  Tensor src = contiguous(src_in.to(x.dtype()));
  Tensor index = checked_index(index_in, x.device(), x.size(dim), "index_add", dim);
  DeviceGuard guard(x.device().index);
  check_launch(launch_index_add(x.dtype(), kernel_scalar(alpha, x.dtype()), out.data_ptr(), src.data_ptr(),
                                index.data<int64_t>(), src.numel(), index_geometry(src, out, &src, dim),
                                stream_of(x)),
               "index_add");
  return out;
}

Tensor masked_select_cuda(const Tensor& x, const Tensor& mask_in) {
  TR_CHECK(mask_in.dtype() == DType::Bool, TypeError, "masked_select: mask must be bool, got {}",
           dtype_name(mask_in.dtype()));
  IntList shape = broadcast_shapes(x.sizes(), mask_in.sizes(), "masked_select");
  Tensor mask = mask_in.is_cuda() ? mask_in : mask_in.to(x.device());
  Tensor xs = contiguous(expand(x, shape)), ms = contiguous(expand(mask, shape));
  Tensor positions = cumsum(ms.reshape({-1}), 0, DType::Int64);
  const int64_t count = ms.numel() == 0 ? 0 : positions.select(0, ms.numel() - 1).item<int64_t>();
  Tensor out = empty({count}, TensorOptions(x.dtype(), x.device()));
  DeviceGuard guard(x.device().index);
  check_launch(launch_masked_compact(x.element_size(), xs.data_ptr(), ms.data<bool>(), positions.data<int64_t>(),
                                     out.data_ptr(), ms.numel(), stream_of(x)),
               "masked_select");
  return out;
}

Tensor nonzero_cuda(const Tensor& x_in) {
  Tensor x = contiguous(x_in.to(DType::Bool));
  Tensor positions = cumsum(x.reshape({-1}), 0, DType::Int64);
  const int64_t count = x.numel() == 0 ? 0 : positions.select(0, x.numel() - 1).item<int64_t>();
  Tensor out = empty({count, x.dim()}, TensorOptions(DType::Int64, x.device()));
  DeviceGuard guard(x.device().index);
  check_launch(launch_nonzero_coords(x.data<bool>(), positions.data<int64_t>(), out.data<int64_t>(), x.numel(),
                                     static_cast<int>(x.dim()), x.sizes().data(), stream_of(x)),
               "nonzero");
  return out;
}

OpKernel<ops::index_select> reg_index_select(DispatchKey::CUDA, &index_select_cuda);
OpKernel<ops::gather> reg_gather(DispatchKey::CUDA, &gather_cuda);
OpKernel<ops::scatter> reg_scatter(DispatchKey::CUDA, &scatter_cuda);
OpKernel<ops::index_add> reg_index_add(DispatchKey::CUDA, &index_add_cuda);
OpKernel<ops::masked_select> reg_masked_select(DispatchKey::CUDA, &masked_select_cuda);
OpKernel<ops::nonzero> reg_nonzero(DispatchKey::CUDA, &nonzero_cuda);

}  // namespace
}  // namespace trainrun::cuda
