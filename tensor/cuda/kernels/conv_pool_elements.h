#pragma once
// One output element of each convolution and pooling kernel
// (conv_pool_kernels.cu): im2col, col2im, and the 2-D max and average pools
// with the average pool's backward. Each writes its element once, so results
// are deterministic. Host-and-device: CPU tests run them against the CPU ops.
#include <algorithm>
#include <limits>

#include "tensor/avg_pool_window.h"
#include "tensor/cuda/kernels/element_access.h"
#include "tensor/cuda/kernels/sort_conv_args.h"

namespace trainrun::cuda {

// cols [N, C*kH*kW, Ho*Wo] entry i from images [N, C, H, W] (zero padding).
template <typename T>
TR_HOST_DEVICE inline void im2col_element(const T* x, T* cols, const ConvGeometry& g, int64_t i) {
  const int64_t L = g.Ho * g.Wo, K = g.C * g.kH * g.kW;
  const int64_t l = i % L, row = (i / L) % K, n = i / (L * K);
  const int64_t ow = l % g.Wo, oh = l / g.Wo;
  const int64_t kj = row % g.kW, ki = (row / g.kW) % g.kH, c = row / (g.kW * g.kH);
  const int64_t ih = oh * g.sH - g.pH + ki * g.dH, iw = ow * g.sW - g.pW + kj * g.dW;
  cols[i] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? x[((n * g.C + c) * g.H + ih) * g.W + iw] : T(0);
}

// Image pixel i [N, C, H, W]: the sum of every column entry taken from it.
template <typename T>
TR_HOST_DEVICE inline void col2im_element(const T* cols, T* x, const ConvGeometry& g, int64_t i) {
  const int64_t L = g.Ho * g.Wo, K = g.C * g.kH * g.kW;
  const int64_t w = i % g.W, h = (i / g.W) % g.H, c = (i / (g.W * g.H)) % g.C, n = i / (g.W * g.H * g.C);
  opmath<T> sum = 0;
  for (int64_t ki = 0; ki < g.kH; ++ki) {
    const int64_t th = h + g.pH - ki * g.dH;
    if (th < 0 || th % g.sH != 0) continue;
    const int64_t oh = th / g.sH;
    if (oh >= g.Ho) continue;
    for (int64_t kj = 0; kj < g.kW; ++kj) {
      const int64_t tw = w + g.pW - kj * g.dW;
      if (tw < 0 || tw % g.sW != 0) continue;
      const int64_t ow = tw / g.sW;
      if (ow >= g.Wo) continue;
      const int64_t row = (c * g.kH + ki) * g.kW + kj;
      sum += convert<opmath<T>>(cols[(n * K + row) * L + oh * g.Wo + ow]);
    }
  }
  x[i] = convert<T>(sum);
}

// Output o [planes, Ho, Wo] of a max pool, and the flat index (ih * W + iw)
// of its maximum: NaN wins, then the first of equal values.
template <typename T>
TR_HOST_DEVICE inline void max_pool2d_element(const T* x, T* out, int64_t* indices, const PoolArgs& a, int64_t o) {
  using Acc = opmath<T>;
  const int64_t ow = o % a.Wo, oh = (o / a.Wo) % a.Ho, plane = o / (a.Wo * a.Ho);
  const T* src = x + plane * a.H * a.W;
  Acc best = std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                    : std::numeric_limits<Acc>::lowest();
  int64_t best_i = -1;
  bool done = false;
  for (int64_t i = 0; i < a.kH && !done; ++i) {
    const int64_t ih = oh * a.sH - a.pH + i * a.dH;
    if (ih < 0 || ih >= a.H) continue;
    for (int64_t j = 0; j < a.kW; ++j) {
      const int64_t iw = ow * a.sW - a.pW + j * a.dW;
      if (iw < 0 || iw >= a.W) continue;
      const Acc v = convert<Acc>(src[ih * a.W + iw]);
      if (v > best || v != v || best_i < 0) {
        best = v;
        best_i = ih * a.W + iw;
        if (v != v) {
          done = true;
          break;
        }
      }
    }
  }
  out[o] = convert<T>(best);
  indices[o] = best_i;
}

template <typename T>
TR_HOST_DEVICE inline void avg_pool2d_element(const T* x, T* out, const PoolArgs& a, int64_t o) {
  const int64_t ow = o % a.Wo, oh = (o / a.Wo) % a.Ho, plane = o / (a.Wo * a.Ho);
  const T* src = x + plane * a.H * a.W;
  const AvgWindow win = avg_window(a, oh, ow, a.count_include_pad);
  opmath<T> sum = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += convert<opmath<T>>(src[ih * a.W + iw]);
  out[o] = convert<T>(sum / static_cast<opmath<T>>(win.divisor));
}

// Input element i [planes, H, W]: the shares of the output windows that cover it.
template <typename T>
TR_HOST_DEVICE inline void avg_pool2d_backward_element(const T* grad_out, T* grad_in, const PoolArgs& a, int64_t i) {
  const int64_t w = i % a.W, h = (i / a.W) % a.H, plane = i / (a.W * a.H);
  const T* go = grad_out + plane * a.Ho * a.Wo;
  // Windows start at oh*sH - pH and span kH rows.
  const int64_t oh_lo = std::max(int64_t(0), (h + a.pH - a.kH + a.sH) / a.sH);
  const int64_t oh_hi = std::min(a.Ho - 1, (h + a.pH) / a.sH);
  const int64_t ow_lo = std::max(int64_t(0), (w + a.pW - a.kW + a.sW) / a.sW);
  const int64_t ow_hi = std::min(a.Wo - 1, (w + a.pW) / a.sW);
  opmath<T> sum = 0;
  for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)
    for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
      const AvgWindow win = avg_window(a, oh, ow, a.count_include_pad);
      if (h >= win.h0 && h < win.h1 && w >= win.w0 && w < win.w1)
        sum += convert<opmath<T>>(go[oh * a.Wo + ow]) / static_cast<opmath<T>>(win.divisor);
    }
  grad_in[i] = convert<T>(sum);
}

}  // namespace trainrun::cuda
