#pragma once
// Arguments of the sorting kernels (sort_kernels.cu) and of the convolution
// and pooling kernels (conv_pool_kernels.cu).
#include <cstddef>
#include <cstdint>

#include "tensor/cuda/kernels/kernel_args.h"

namespace trainrun::cuda {

// Stable sort of each row of a contiguous [rows, n] matrix, carrying int64
// values along (the original positions); keys are int32, int64, float32 or
// float64. offsets: rows + 1 ints (i * n).
// With temp == nullptr, only sets *temp_bytes to the scratch it needs.
int launch_sort_rows(DType dt, bool descending, const void* keys_in, void* keys_out, const int64_t* values_in,
                     int64_t* values_out, int64_t rows, int64_t n, const int* offsets, void* temp, size_t* temp_bytes,
                     CUstream_st* stream);

struct ConvGeometry {
  int64_t N, C, H, W, kH, kW, Ho, Wo, sH, sW, pH, pW, dH, dW;
};
// cols [N, C*kH*kW, Ho*Wo] from images [N, C, H, W] (zero padding), and back
// (col2im sums every column entry into its pixel; no atomics).
int launch_im2col(DType dt, const void* x, void* cols, const ConvGeometry& g, CUstream_st* stream);
int launch_col2im(DType dt, const void* cols, void* x, const ConvGeometry& g, CUstream_st* stream);

struct PoolArgs {
  int64_t planes, H, W, Ho, Wo, kH, kW, sH, sW, pH, pW, dH, dW;
  bool count_include_pad;
};
// Contiguous [planes, H, W] in, [planes, Ho, Wo] out; max also writes the
// flat index (ih * W + iw) of each maximum.
int launch_max_pool2d(DType dt, const void* x, void* out, int64_t* indices, const PoolArgs& a, CUstream_st* stream);
int launch_avg_pool2d(DType dt, const void* x, void* out, const PoolArgs& a, CUstream_st* stream);
int launch_avg_pool2d_backward(DType dt, const void* grad_out, void* grad_in, const PoolArgs& a, CUstream_st* stream);

}  // namespace trainrun::cuda
