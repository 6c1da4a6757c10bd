// CUDA kernels behind conv2d (im2col / col2im around cuBLAS GEMMs) and the
// 2-D pools: grid-stride loops over the per-element code of
// conv_pool_elements.h.
#include "tensor/cuda/kernels/conv_pool_elements.h"
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {
namespace {

template <typename T>
__global__ void im2col_kernel(const T* x, T* cols, ConvGeometry g, int64_t total) {
  TR_GRID_LOOP(i, total) im2col_element(x, cols, g, i);
}

template <typename T>
__global__ void col2im_kernel(const T* cols, T* x, ConvGeometry g, int64_t total) {
  TR_GRID_LOOP(i, total) col2im_element(cols, x, g, i);
}

template <typename T>
__global__ void max_pool2d_kernel(const T* x, T* out, int64_t* indices, PoolArgs a, int64_t total) {
  TR_GRID_LOOP(o, total) max_pool2d_element(x, out, indices, a, o);
}

template <typename T>
__global__ void avg_pool2d_kernel(const T* x, T* out, PoolArgs a, int64_t total) {
  TR_GRID_LOOP(o, total) avg_pool2d_element(x, out, a, o);
}

template <typename T>
__global__ void avg_pool2d_backward_kernel(const T* grad_out, T* grad_in, PoolArgs a, int64_t total) {
  TR_GRID_LOOP(i, total) avg_pool2d_backward_element(grad_out, grad_in, a, i);
}

template <typename F>
int float_types(DType dt, F f) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (is_floating_cuda<T>()) {
      f(T{});
      return static_cast<int>(cudaGetLastError());
    } else {
      return static_cast<int>(cudaErrorInvalidValue);
    }
  });
}

}  // namespace

int launch_im2col(DType dt, const void* x, void* cols, const ConvGeometry& g, CUstream_st* stream) {
  const int64_t total = g.N * g.C * g.kH * g.kW * g.Ho * g.Wo;
  if (total == 0) return 0;
  return float_types(dt, [&](auto tag) {
    using T = decltype(tag);
    im2col_kernel<T><<<grid_blocks(total), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(cols), g, total);
  });
}

int launch_col2im(DType dt, const void* cols, void* x, const ConvGeometry& g, CUstream_st* stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return 0;
  return float_types(dt, [&](auto tag) {
    using T = decltype(tag);
    col2im_kernel<T><<<grid_blocks(total), 256, 0, stream>>>(static_cast<const T*>(cols), static_cast<T*>(x), g, total);
  });
}

int launch_max_pool2d(DType dt, const void* x, void* out, int64_t* indices, const PoolArgs& a, CUstream_st* stream) {
  const int64_t total = a.planes * a.Ho * a.Wo;
  if (total == 0) return 0;
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (std::is_same<T, bool>::value) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      max_pool2d_kernel<T><<<grid_blocks(total), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(out),
                                                                  indices, a, total);
      return static_cast<int>(cudaGetLastError());
    }
  });
}

int launch_avg_pool2d(DType dt, const void* x, void* out, const PoolArgs& a, CUstream_st* stream) {
  const int64_t total = a.planes * a.Ho * a.Wo;
  if (total == 0) return 0;
  return float_types(dt, [&](auto tag) {
    using T = decltype(tag);
    avg_pool2d_kernel<T><<<grid_blocks(total), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(out), a,
                                                                total);
  });
}

int launch_avg_pool2d_backward(DType dt, const void* grad_out, void* grad_in, const PoolArgs& a, CUstream_st* stream) {
  const int64_t total = a.planes * a.H * a.W;
  if (total == 0) return 0;
  return float_types(dt, [&](auto tag) {
    using T = decltype(tag);
    avg_pool2d_backward_kernel<T><<<grid_blocks(total), 256, 0, stream>>>(static_cast<const T*>(grad_out),
                                                                         static_cast<T*>(grad_in), a, total);
  });
}

}  // namespace trainrun::cuda
