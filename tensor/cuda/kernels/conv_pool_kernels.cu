// CUDA kernels behind conv2d (im2col / col2im around cuBLAS GEMMs) and the
// 2-D pools. Every kernel writes each output once (no atomics), so results
// are deterministic; the math mirrors tensor/cpu/{conv,pool}_kernels.cc.
#include <cuda/std/limits>

#include "tensor/cuda/kernels/elementwise_loop.cuh"
#include "tensor/cuda/kernels/sort_conv_args.h"

namespace trainrun::cuda {
namespace {

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b > (int64_t(1) << 30) ? (int64_t(1) << 30) : (b < 1 ? 1 : b));
}

#define TR_GRID_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void im2col_kernel(const T* x, T* cols, ConvGeometry g, int64_t total) {
  const int64_t L = g.Ho * g.Wo, K = g.C * g.kH * g.kW;
  TR_GRID_LOOP(i, total) {
    const int64_t l = i % L, row = (i / L) % K, n = i / (L * K);
    const int64_t ow = l % g.Wo, oh = l / g.Wo;
    const int64_t kj = row % g.kW, ki = (row / g.kW) % g.kH, c = row / (g.kW * g.kH);
    const int64_t ih = oh * g.sH - g.pH + ki * g.dH, iw = ow * g.sW - g.pW + kj * g.dW;
    cols[i] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? x[((n * g.C + c) * g.H + ih) * g.W + iw] : T(0);
  }
}

template <typename T>
__global__ void col2im_kernel(const T* cols, T* x, ConvGeometry g, int64_t total) {
  const int64_t L = g.Ho * g.Wo, K = g.C * g.kH * g.kW;
  TR_GRID_LOOP(i, total) {
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
}

template <typename T>
__global__ void max_pool2d_kernel(const T* x, T* out, int64_t* indices, PoolArgs a, int64_t total) {
  using Acc = opmath<T>;
  TR_GRID_LOOP(o, total) {
    const int64_t ow = o % a.Wo, oh = (o / a.Wo) % a.Ho, plane = o / (a.Wo * a.Ho);
    const T* src = x + plane * a.H * a.W;
    Acc best = ::cuda::std::numeric_limits<Acc>::has_infinity ? -::cuda::std::numeric_limits<Acc>::infinity()
                                                               : ::cuda::std::numeric_limits<Acc>::lowest();
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
}

struct Window {
  int64_t h0, h1, w0, w1, divisor;
};

__device__ Window avg_window(const PoolArgs& a, int64_t oh, int64_t ow) {
  int64_t h0 = oh * a.sH - a.pH, w0 = ow * a.sW - a.pW;
  int64_t h1 = min(h0 + a.kH, a.H + a.pH), w1 = min(w0 + a.kW, a.W + a.pW);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = max(h0, int64_t(0));
  w0 = max(w0, int64_t(0));
  h1 = min(h1, a.H);
  w1 = min(w1, a.W);
  const int64_t count = a.count_include_pad ? padded : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, max(count, int64_t(1))};
}

template <typename T>
__global__ void avg_pool2d_kernel(const T* x, T* out, PoolArgs a, int64_t total) {
  TR_GRID_LOOP(o, total) {
    const int64_t ow = o % a.Wo, oh = (o / a.Wo) % a.Ho, plane = o / (a.Wo * a.Ho);
    const T* src = x + plane * a.H * a.W;
    const Window win = avg_window(a, oh, ow);
    opmath<T> sum = 0;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += convert<opmath<T>>(src[ih * a.W + iw]);
    out[o] = convert<T>(sum / static_cast<opmath<T>>(win.divisor));
  }
}

// Each input element sums the shares of the output windows that cover it.
template <typename T>
__global__ void avg_pool2d_backward_kernel(const T* grad_out, T* grad_in, PoolArgs a, int64_t total) {
  TR_GRID_LOOP(i, total) {
    const int64_t w = i % a.W, h = (i / a.W) % a.H, plane = i / (a.W * a.H);
    const T* go = grad_out + plane * a.Ho * a.Wo;
    // Windows start at oh*sH - pH and span kH rows.
    const int64_t oh_lo = max(int64_t(0), (h + a.pH - a.kH + a.sH) / a.sH), oh_hi = min(a.Ho - 1, (h + a.pH) / a.sH);
    const int64_t ow_lo = max(int64_t(0), (w + a.pW - a.kW + a.sW) / a.sW), ow_hi = min(a.Wo - 1, (w + a.pW) / a.sW);
    opmath<T> sum = 0;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const Window win = avg_window(a, oh, ow);
        if (h >= win.h0 && h < win.h1 && w >= win.w0 && w < win.w1)
          sum += convert<opmath<T>>(go[oh * a.Wo + ow]) / static_cast<opmath<T>>(win.divisor);
      }
    grad_in[i] = convert<T>(sum);
  }
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
    im2col_kernel<T><<<blocks_for(total), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(cols), g, total);
  });
}

int launch_col2im(DType dt, const void* cols, void* x, const ConvGeometry& g, CUstream_st* stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return 0;
  return float_types(dt, [&](auto tag) {
    using T = decltype(tag);
    col2im_kernel<T><<<blocks_for(total), 256, 0, stream>>>(static_cast<const T*>(cols), static_cast<T*>(x), g, total);
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
      max_pool2d_kernel<T><<<blocks_for(total), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(out),
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
    avg_pool2d_kernel<T><<<blocks_for(total), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(out), a,
                                                                total);
  });
}

int launch_avg_pool2d_backward(DType dt, const void* grad_out, void* grad_in, const PoolArgs& a, CUstream_st* stream) {
  const int64_t total = a.planes * a.H * a.W;
  if (total == 0) return 0;
  return float_types(dt, [&](auto tag) {
    using T = decltype(tag);
    avg_pool2d_backward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(static_cast<const T*>(grad_out),
                                                                         static_cast<T*>(grad_in), a, total);
  });
}

}  // namespace trainrun::cuda
