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
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

IntList pair_arg(const IntList& v, const char* name, const char* op, int64_t min_value) {
  TR_CHECK(v.size() == 1 || v.size() == 2, ValueError, "{}: {} must have 1 or 2 values, got [{}]", op, name,
           fmt::join(v, ", "));
  IntList r = v.size() == 1 ? IntList{v[0], v[0]} : v;
  TR_CHECK(r[0] >= min_value && r[1] >= min_value, ValueError, "{}: {} must be >= {}, got [{}]", op, name, min_value,
           fmt::join(v, ", "));
  return r;
}

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
void gemm_rowmajor(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C) {
  if constexpr (std::is_same<T, float>::value)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, A, K, B, N, 0.f, C, N);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, A, K, B, N, 0.0, C, N);
}

Tensor conv2d_cpu(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias, const IntList& stride_in,
                  const IntList& padding_in, const IntList& dilation_in, int64_t groups) {
  const char* op = "conv2d";
  TR_CHECK(input_in.dim() == 3 || input_in.dim() == 4, ValueError,
           "conv2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {}", input_in.shape_str());
  TR_CHECK(weight_in.dim() == 4, ValueError, "conv2d: expected a 4-D weight (C_out, C_in/groups, kH, kW), got shape {}",
           weight_in.shape_str());
  TR_CHECK(groups >= 1, ValueError, "conv2d: groups must be positive, got {}", groups);
  TR_CHECK(input_in.dtype() == weight_in.dtype(), TypeError, "conv2d: input dtype {} and weight dtype {} differ",
           dtype_name(input_in.dtype()), dtype_name(weight_in.dtype()));
  TR_CHECK(is_floating(input_in.dtype()), TypeError, "conv2d: expected floating point tensors, got {}",
           dtype_name(input_in.dtype()));
  bool batched = input_in.dim() == 4;
  Tensor input = batched ? input_in : unsqueeze(input_in, 0);
  IntList st = pair_arg(stride_in, "stride", op, 1), pad = pair_arg(padding_in, "padding", op, 0),
          dil = pair_arg(dilation_in, "dilation", op, 1);
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight_in.size(0), Cg = weight_in.size(1), kH = weight_in.size(2), kW = weight_in.size(3);
  TR_CHECK(C == Cg * groups, ValueError,
           "conv2d: input has {} channels but weight of shape {} with groups={} expects {}", C, weight_in.shape_str(),
           groups, Cg * groups);
  TR_CHECK(O % groups == 0, ValueError, "conv2d: out channels ({}) must be divisible by groups ({})", O, groups);
  if (bias.defined())
    TR_CHECK(bias.dim() == 1 && bias.size(0) == O, ValueError, "conv2d: bias of shape {} must be [{}]", bias.shape_str(), O);
  const int64_t Ho = conv_out_size(H, kH, st[0], pad[0], dil[0]), Wo = conv_out_size(W, kW, st[1], pad[1], dil[1]);
  TR_CHECK(Ho > 0 && Wo > 0, ValueError,
           "conv2d: kernel {}x{} (dilation {}x{}) is larger than the padded input {}x{}", kH, kW, dil[0], dil[1],
           H + 2 * pad[0], W + 2 * pad[1]);

  // f16/bf16 run in float32.
  DType compute = input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor x = contiguous(input.to(compute)), w = contiguous(weight_in.to(compute));
  Tensor out = empty({N, O, Ho, Wo}, compute);
  const int64_t Og = O / groups, K = Cg * kH * kW, P = Ho * Wo;
  const bool pointwise = kH == 1 && kW == 1 && st[0] == 1 && st[1] == 1 && pad[0] == 0 && pad[1] == 0;
  if (compute == DType::Float32) {
    Conv2dShape shape{N, C, H, W, O, kH, kW, Ho, Wo, groups, {st[0], st[1]}, {pad[0], pad[1]}, {dil[0], dil[1]}};
    Tensor b = bias.defined() ? contiguous(bias.to(compute)) : Tensor();
    if (onednn_conv2d_forward(shape, static_cast<const float*>(x.data_ptr()), static_cast<const float*>(w.data_ptr()),
                              b.defined() ? static_cast<const float*>(b.data_ptr()) : nullptr,
                              static_cast<float*>(out.data_ptr()))) {
      Tensor result = compute == input.dtype() ? out : out.to(input.dtype());
      return batched ? result : squeeze(result, 0);
    }
  }
  visit_float_dtype(compute, op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value) {
      std::vector<T> col(pointwise ? 0 : K * P);
      const T* px = static_cast<const T*>(x.data_ptr());
      const T* pw = static_cast<const T*>(w.data_ptr());
      T* po = static_cast<T*>(out.data_ptr());
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t g = 0; g < groups; ++g) {
          const T* img = px + (n * C + g * Cg) * H * W;
          const T* B = img;
          if (!pointwise) {
            im2col(img, col.data(), Cg, H, W, kH, kW, Ho, Wo, st, pad, dil);
            B = col.data();
          }
          gemm_rowmajor<T>(Og, P, K, pw + g * Og * K, B, po + (n * O + g * Og) * P);
        }
      }
    }
  });
  if (bias.defined()) {
    Tensor b = bias.to(compute).view({1, O, 1, 1});
    add_(out, b);
  }
  Tensor result = compute == input.dtype() ? out : out.to(input.dtype());
  return batched ? result : squeeze(result, 0);
}

KernelRegistration<Tensor(const Tensor&, const Tensor&, const Tensor&, const IntList&, const IntList&, const IntList&,
                          int64_t)>
    reg_conv2d("conv2d", DispatchKey::CPU, &conv2d_cpu);

}  // namespace

// Used by pool kernels too.
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t numer = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = numer / s + 1;
  // The last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

}  // namespace trainrun
