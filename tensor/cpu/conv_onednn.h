#pragma once
// float32 conv2d forward through oneDNN, the library PyTorch's CPU
// convolutions use: direct JIT kernels on blocked layouts beat im2col + GEMM
// by 1.5-2x on this kind of shape. Primitives are cached per shape.
#include <cstdint>

namespace trainrun {

struct Conv2dShape {
  int64_t N, C, H, W;       // input
  int64_t O, kH, kW;        // weight [O, C/groups, kH, kW]
  int64_t Ho, Wo;           // output
  int64_t groups;
  int64_t stride[2], pad[2], dilation[2];
};

// Computes out[N, O, Ho, Wo] (contiguous NCHW) from contiguous x and w and an
// optional bias[O]. Returns false (and computes nothing) when oneDNN has no
// implementation for the shape, so the caller can fall back.
bool onednn_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* out);

// The gradients of that convolution from grad_out[N, O, Ho, Wo]: grad_x
// (like x) and grad_w (like w, with grad_b[O] alongside when not null); a
// null output is not computed. Same fallback contract as the forward.
bool onednn_conv2d_backward(const Conv2dShape& s, const float* x, const float* w, const float* grad_out, float* grad_x,
                            float* grad_w, float* grad_b);

}  // namespace trainrun
