#pragma once
// The checked geometry of conv2d, the 2-D pools and layer/rms norm, shared by
// the CPU and CUDA kernels so that both accept and refuse the same arguments
// with the same messages.
#include "tensor/avg_pool_window.h"  // avg_window over a PoolGeometry
#include "tensor/tensor.h"

namespace trainrun {

// The checked arguments of one convolution (forward and backward).
struct ConvArgs {
  bool batched;
  IntList st, pad, dil;
  int64_t N, C, H, W, O, Cg, kH, kW, Ho, Wo, groups;
};
ConvArgs check_conv_args(const char* op, const Tensor& input, const Tensor& weight, const IntList& stride,
                         const IntList& padding, const IntList& dilation, int64_t groups);

// Output size of a pooling window sweep (PyTorch's rule, ceil_mode included).
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

struct PoolGeometry {
  int64_t planes, H, W, Ho, Wo, kH, kW, sH, sW, pH, pW, dH, dW;
  IntList out_shape;
};
PoolGeometry pool_geometry(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, const IntList& d,
                           bool ceil_mode, const char* op);


// Rows of the normalized trailing dims, and the stats' shape.
struct NormShape {
  int64_t rows = 1, n = 1;
  IntList stat_shape;
};
// Checks layer_norm / rms_norm's arguments (weight and bias may be undefined).
NormShape check_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight, const Tensor& bias,
                     const char* op);

}  // namespace trainrun
