// CPU conv2d. float32 (and f16/bf16, computed in float32) goes to oneDNN
// (conv_onednn.cc); float64, and any shape oneDNN declines, runs im2col + one
// GEMM per (image, group) on OpenBLAS. A 1x1, stride-1, unpadded convolution
// skips im2col and multiplies the image.
#include <cblas.h>

#include <cstring>

#include "tensor/cpu/conv_onednn.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/nn_shapes.h"
#include "tensor/op_schemas.h"
#include "tensor/reductions.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

// Columns [C*kH*kW, Ho*Wo] of one image [C, H, W] (zero padding).
template <typename T>
void im2col(const T* img, T* col, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, int64_t Ho, int64_t Wo,
            const IntList& st, const IntList& pad, const IntList& dil) {
  parallel_for(0, C * kH * kW, 8, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      int64_t c = row / (kH * kW), ki = (row / kW) % kH, kj = row % kW;
      T* dst = col + row * Ho * Wo;
      const T* src = img + c * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        int64_t ih = oh * st[0] - pad[0] + ki * dil[0];
        T* d = dst + oh * Wo;
        if (ih < 0 || ih >= H) {
          std::memset(d, 0, Wo * sizeof(T));
          continue;
        }
        const T* srow = src + ih * W;
        int64_t iw0 = -pad[1] + kj * dil[1];
        if (st[1] == 1) {
          // Valid output columns have 0 <= ow + iw0 < W.
          int64_t lo = std::max<int64_t>(0, -iw0), hi = std::min<int64_t>(Wo, W - iw0);
          for (int64_t ow = 0; ow < std::min(lo, Wo); ++ow) d[ow] = 0;
          if (hi > lo) std::memcpy(d + lo, srow + lo + iw0, (hi - lo) * sizeof(T));
          for (int64_t ow = std::max(hi, lo); ow < Wo; ++ow) d[ow] = 0;
        } else {
          for (int64_t ow = 0; ow < Wo; ++ow) {
            int64_t iw = ow * st[1] + iw0;
            d[ow] = (iw >= 0 && iw < W) ? srow[iw] : T(0);
          }
        }
      }
    }
  });
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T beta, T* C) {
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  if constexpr (std::is_same<T, float>::value)
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.f, A, lda, B, ldb, beta, C, N);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A, lda, B, ldb, beta, C, N);
}

// The inverse scatter of im2col: adds columns [C*kH*kW, Ho*Wo] back into an
// image [C, H, W] (which the caller zeroed). One task per channel, so no two
// tasks write the same pixel.
template <typename T>
void col2im(const T* col, T* img, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, int64_t Ho, int64_t Wo,
            const IntList& st, const IntList& pad, const IntList& dil) {
  parallel_for(0, C, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      T* dst = img + c * H * W;
      for (int64_t ki = 0; ki < kH; ++ki)
        for (int64_t kj = 0; kj < kW; ++kj) {
          const T* src = col + ((c * kH + ki) * kW + kj) * Ho * Wo;
          for (int64_t oh = 0; oh < Ho; ++oh) {
            int64_t ih = oh * st[0] - pad[0] + ki * dil[0];
            if (ih < 0 || ih >= H) continue;
            T* drow = dst + ih * W;
            const T* srow = src + oh * Wo;
            for (int64_t ow = 0; ow < Wo; ++ow) {
              int64_t iw = ow * st[1] - pad[1] + kj * dil[1];
              if (iw >= 0 && iw < W) drow[iw] += srow[ow];
            }
          }
        }
    }
  });
}

Conv2dShape onednn_shape(const ConvArgs& a) {
  return {a.N, a.C, a.H, a.W, a.O, a.kH, a.kW, a.Ho, a.Wo, a.groups, {a.st[0], a.st[1]}, {a.pad[0], a.pad[1]},
          {a.dil[0], a.dil[1]}};
}

// f16/bf16 run in float32.
DType compute_dtype(DType d) { return d == DType::Float64 ? DType::Float64 : DType::Float32; }

template <typename T>
const T* ptr(const Tensor& t) {
  return static_cast<const T*>(t.data_ptr());
}
template <typename T>
T* mutable_ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

Tensor conv2d_cpu(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias, const IntList& stride_in,
                  const IntList& padding_in, const IntList& dilation_in, int64_t groups) {
  const ConvArgs a = check_conv_args("conv2d", input_in, weight_in, stride_in, padding_in, dilation_in, groups);
  if (bias.defined())
    TR_CHECK(bias.dim() == 1 && bias.size(0) == a.O, ValueError, "conv2d: bias of shape {} must be [{}]",
             bias.shape_str(), a.O);
  const DType compute = compute_dtype(input_in.dtype());
  Tensor x = contiguous(input_in.to(compute)), w = contiguous(weight_in.to(compute));
  Tensor out = empty({a.N, a.O, a.Ho, a.Wo}, compute);
  auto finish = [&](Tensor result) {
    if (result.dtype() != input_in.dtype()) result = result.to(input_in.dtype());
    return a.batched ? result : squeeze(result, 0);
  };
  if (compute == DType::Float32) {
    Tensor b = bias.defined() ? contiguous(bias.to(compute)) : Tensor();
    if (onednn_conv2d_forward(onednn_shape(a), ptr<float>(x), ptr<float>(w), b.defined() ? ptr<float>(b) : nullptr,
                              mutable_ptr<float>(out)))
      return finish(out);
  }
  const int64_t Og = a.O / groups, K = a.Cg * a.kH * a.kW, P = a.Ho * a.Wo;
  const bool pointwise = a.kH == 1 && a.kW == 1 && a.st[0] == 1 && a.st[1] == 1 && a.pad[0] == 0 && a.pad[1] == 0;
  visit_float_dtype(compute, "conv2d", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value) {
      std::vector<T> col(pointwise ? 0 : K * P);
      for (int64_t n = 0; n < a.N; ++n) {
        for (int64_t g = 0; g < groups; ++g) {
          const T* img = ptr<T>(x) + (n * a.C + g * a.Cg) * a.H * a.W;
          const T* B = img;
          if (!pointwise) {
            im2col(img, col.data(), a.Cg, a.H, a.W, a.kH, a.kW, a.Ho, a.Wo, a.st, a.pad, a.dil);
            B = col.data();
          }
          gemm<T>(false, false, Og, P, K, ptr<T>(w) + g * Og * K, B, T(0),
                  mutable_ptr<T>(out) + (n * a.O + g * Og) * P);
        }
      }
    }
  });
  if (bias.defined()) add_(out, bias.to(compute).view({1, a.O, 1, 1}));
  return finish(out);
}

// grad_weight[g] = sum_n grad_out[n, g] @ im2col(x[n, g])^T and
// grad_x[n, g] = col2im(weight[g]^T @ grad_out[n, g]); grad_bias sums
// grad_out over everything but the channel.
std::tuple<Tensor, Tensor, Tensor> conv2d_backward_cpu(const Tensor& grad_out_in, const Tensor& input_in,
                                                       const Tensor& weight_in, const IntList& stride,
                                                       const IntList& padding, const IntList& dilation, int64_t groups,
                                                       bool need_input, bool need_weight, bool need_bias) {
  const ConvArgs a = check_conv_args("conv2d_backward", input_in, weight_in, stride, padding, dilation, groups);
  const IntList out_shape = a.batched ? IntList{a.N, a.O, a.Ho, a.Wo} : IntList{a.O, a.Ho, a.Wo};
  TR_CHECK(grad_out_in.sizes() == out_shape, ValueError,
           "conv2d_backward: grad_output has shape {} but the convolution's output is [{}]", grad_out_in.shape_str(),
           fmt::join(out_shape, ", "));
  const DType compute = compute_dtype(input_in.dtype());
  Tensor x = contiguous(input_in.to(compute)), w = contiguous(weight_in.to(compute));
  Tensor gy = contiguous(grad_out_in.to(compute)).view({a.N, a.O, a.Ho, a.Wo});
  Tensor gx = need_input ? empty({a.N, a.C, a.H, a.W}, compute) : Tensor();
  Tensor gw = need_weight ? empty(weight_in.sizes(), compute) : Tensor();
  Tensor gb;
  auto finish = [&]() {
    auto cast = [&](Tensor t) { return t.defined() && t.dtype() != input_in.dtype() ? t.to(input_in.dtype()) : t; };
    if (gx.defined() && !a.batched) gx = squeeze(gx, 0);
    return std::make_tuple(cast(gx), cast(gw), cast(gb));
  };
  bool done = false;
  if (compute == DType::Float32 && (need_input || need_weight)) {
    // oneDNN computes the bias gradient together with the weight gradient.
    Tensor gb32 = need_bias && need_weight ? empty({a.O}, compute) : Tensor();
    done = onednn_conv2d_backward(onednn_shape(a), ptr<float>(x), ptr<float>(w), ptr<float>(gy),
                                  need_input ? mutable_ptr<float>(gx) : nullptr,
                                  need_weight ? mutable_ptr<float>(gw) : nullptr,
                                  gb32.defined() ? mutable_ptr<float>(gb32) : nullptr);
    if (done && gb32.defined()) gb = gb32;
  }
  if (!done && (need_input || need_weight)) {
    const int64_t Og = a.O / groups, K = a.Cg * a.kH * a.kW, P = a.Ho * a.Wo;
    visit_float_dtype(compute, "conv2d_backward", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value) {
        std::vector<T> col(K * P);
        if (need_input) std::memset(gx.data_ptr(), 0, gx.numel() * sizeof(T));
        for (int64_t n = 0; n < a.N; ++n) {
          for (int64_t g = 0; g < groups; ++g) {
            const T* dy = ptr<T>(gy) + (n * a.O + g * Og) * P;
            if (need_weight) {
              const T* img = ptr<T>(x) + (n * a.C + g * a.Cg) * a.H * a.W;
              im2col(img, col.data(), a.Cg, a.H, a.W, a.kH, a.kW, a.Ho, a.Wo, a.st, a.pad, a.dil);
              gemm<T>(false, true, Og, K, P, dy, col.data(), n == 0 ? T(0) : T(1), mutable_ptr<T>(gw) + g * Og * K);
            }
            if (need_input) {
              gemm<T>(true, false, K, P, Og, ptr<T>(w) + g * Og * K, dy, T(0), col.data());
              col2im(col.data(), mutable_ptr<T>(gx) + (n * a.C + g * a.Cg) * a.H * a.W, a.Cg, a.H, a.W, a.kH, a.kW,
                     a.Ho, a.Wo, a.st, a.pad, a.dil);
            }
          }
        }
      }
    });
  }
  if (need_bias && !gb.defined()) gb = sum(gy, {0, 2, 3});
  return finish();
}

OpKernel<ops::conv2d> reg_conv2d(DispatchKey::CPU, &conv2d_cpu);
OpKernel<ops::conv2d_backward> reg_conv2d_backward(DispatchKey::CPU, &conv2d_backward_cpu);

}  // namespace

}  // namespace trainrun
