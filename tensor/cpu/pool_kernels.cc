// CPU max_pool2d (with argmax indices for backward) and avg_pool2d.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/nn_shapes.h"
#include "tensor/op_schemas.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {

namespace {

std::tuple<Tensor, Tensor> max_pool2d_cpu(const Tensor& x_in, const IntList& k, const IntList& s, const IntList& p,
                                          const IntList& d, bool ceil_mode) {
  PoolGeometry g = pool_geometry(x_in, k, s, p, d, ceil_mode, "max_pool2d");
  Tensor x = contiguous(x_in);
  Tensor out = empty(g.out_shape, x.dtype()), idx = empty(g.out_shape, DType::Int64);
  visit_numeric_dtype(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const T* px = static_cast<const T*>(x.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    int64_t* pi = idx.data<int64_t>();
    // An element replaces the window's best when greater, or NaN (PyTorch's rule: the last NaN wins).
    auto window = [&](const T* src, int64_t oh, int64_t ow, int64_t o) {
      Acc best = -std::numeric_limits<Acc>::infinity();
      if (!std::numeric_limits<Acc>::has_infinity) best = std::numeric_limits<Acc>::lowest();
      int64_t best_i = -1;
      for (int64_t i = 0; i < g.kH; ++i) {
        const int64_t ih = oh * g.sH - g.pH + i * g.dH;
        if (ih < 0 || ih >= g.H) continue;
        for (int64_t j = 0; j < g.kW; ++j) {
          const int64_t iw = ow * g.sW - g.pW + j * g.dW;
          if (iw < 0 || iw >= g.W) continue;
          const Acc v = static_cast<Acc>(src[ih * g.W + iw]);
          if (v > best || v != v || best_i < 0) {
            best = v;
            best_i = ih * g.W + iw;
          }
        }
      }
      po[o] = static_cast<T>(best);
      pi[o] = best_i;
    };
    // Rows whose windows lie inside the plane, at the columns ow_lo..ow_hi whose windows do too, go a window
    // element at a time across the whole row: no bounds checks, no branches, and a loop over ow the compiler
    // vectorizes. One window at a time with a branch per element cost 20 ns an output on random data (the
    // compare mispredicts half the time): 20 ms for a 32x32x64x64 input's 2x2 pooling.
    auto first_inside = [](int64_t pad, int64_t stride) { return (pad + stride - 1) / stride; };
    auto last_inside = [](int64_t size, int64_t pad, int64_t reach, int64_t stride) {
      const int64_t room = size - 1 + pad - reach;
      return room < 0 ? int64_t{-1} : room / stride;
    };
    const int64_t oh_lo = first_inside(g.pH, g.sH);
    const int64_t oh_hi = std::min(g.Ho - 1, last_inside(g.H, g.pH, (g.kH - 1) * g.dH, g.sH));
    const int64_t ow_lo = first_inside(g.pW, g.sW);
    const int64_t ow_hi = std::min(g.Wo - 1, last_inside(g.W, g.pW, (g.kW - 1) * g.dW, g.sW));
    const bool narrow_index = g.H * g.W <= std::numeric_limits<int32_t>::max();  // (plane positions as int32)
    parallel_for(0, g.planes, 1, [&](int64_t b, int64_t e) {
      std::vector<Acc> best(static_cast<size_t>(g.Wo));
      std::vector<int32_t> best_i(static_cast<size_t>(g.Wo));  // (float-wide, so the row loop vectorizes)
      for (int64_t plane = b; plane < e; ++plane) {
        const T* src = px + plane * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t row = (plane * g.Ho + oh) * g.Wo;
          if (oh < oh_lo || oh > oh_hi || ow_lo > ow_hi || !narrow_index) {
            for (int64_t ow = 0; ow < g.Wo; ++ow) window(src, oh, ow, row + ow);
            continue;
          }
          for (int64_t ow = 0; ow < ow_lo; ++ow) window(src, oh, ow, row + ow);
          for (int64_t ow = ow_hi + 1; ow < g.Wo; ++ow) window(src, oh, ow, row + ow);
          // Window k of the run (column ow_lo + k) starts at first + k * sW.
          const int64_t first = (oh * g.sH - g.pH) * g.W + ow_lo * g.sW - g.pW;
          const int32_t count = static_cast<int32_t>(ow_hi - ow_lo + 1), stride = static_cast<int32_t>(g.sW);
          Acc* __restrict bv = best.data();
          int32_t* __restrict bi = best_i.data();
          for (int32_t k = 0; k < count; ++k) {
            bv[k] = static_cast<Acc>(src[first + k * stride]);
            bi[k] = static_cast<int32_t>(first) + k * stride;
          }
          for (int64_t i = 0; i < g.kH; ++i)
            for (int64_t j = (i == 0 ? 1 : 0); j < g.kW; ++j) {
              const int64_t at = first + i * g.dH * g.W + j * g.dW;
              const int32_t at32 = static_cast<int32_t>(at);
              const T* __restrict in = src + at;
              for (int32_t k = 0; k < count; ++k) {
                const Acc v = static_cast<Acc>(in[k * stride]);
                const Acc b = bv[k];
                const int32_t bix = bi[k];
                const bool take = v > b || v != v;
                bv[k] = take ? v : b;
                bi[k] = take ? at32 + k * stride : bix;
              }
            }
          for (int32_t k = 0; k < count; ++k) {
            po[row + ow_lo + k] = static_cast<T>(bv[k]);
            pi[row + ow_lo + k] = bi[k];
          }
        }
      }
    });
  });
  return {out, idx};
}

Tensor avg_pool2d_cpu(const Tensor& x_in, const IntList& k, const IntList& s, const IntList& p, bool ceil_mode,
                      bool count_include_pad) {
  PoolGeometry g = pool_geometry(x_in, k, s, p, {1, 1}, ceil_mode, "avg_pool2d");
  Tensor x = contiguous(x_in);
  Tensor out = empty(g.out_shape, x.dtype());
  visit_float_dtype(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const T* px = static_cast<const T*>(x.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    parallel_for(0, g.planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t plane = b; plane < e; ++plane) {
        const T* src = px + plane * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh)
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const AvgWindow win = avg_window(g, oh, ow, count_include_pad);
            Acc sum = 0;
            for (int64_t ih = win.h0; ih < win.h1; ++ih)
              for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += static_cast<Acc>(src[ih * g.W + iw]);
            po[(plane * g.Ho + oh) * g.Wo + ow] = static_cast<T>(sum / static_cast<Acc>(win.divisor));
          }
      }
    });
  });
  return out;
}

// Each output's gradient, divided by the forward's divisor, is added to
// every input element of its window. Planes are independent: one thread
// each, no races.
Tensor avg_pool2d_backward_cpu(const Tensor& grad_in, const Tensor& x, const IntList& k, const IntList& s,
                               const IntList& p, bool ceil_mode, bool count_include_pad) {
  PoolGeometry g = pool_geometry(x, k, s, p, {1, 1}, ceil_mode, "avg_pool2d_backward");
  TR_CHECK(grad_in.sizes() == g.out_shape, ValueError,
           "avg_pool2d_backward: the output gradient has shape {} but the pooled output has [{}]", grad_in.shape_str(),
           fmt::join(g.out_shape, ", "));
  Tensor go = contiguous(grad_in.to(x.dtype()));
  Tensor result = zeros(x.sizes(), x.dtype());
  visit_float_dtype(x.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const T* pg = static_cast<const T*>(go.data_ptr());
    T* pr = static_cast<T*>(result.data_ptr());
    parallel_for(0, g.planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t plane = b; plane < e; ++plane) {
        T* dst = pr + plane * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh)
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const AvgWindow win = avg_window(g, oh, ow, count_include_pad);
            const Acc share = static_cast<Acc>(pg[(plane * g.Ho + oh) * g.Wo + ow]) / static_cast<Acc>(win.divisor);
            for (int64_t ih = win.h0; ih < win.h1; ++ih)
              for (int64_t iw = win.w0; iw < win.w1; ++iw)
                dst[ih * g.W + iw] = static_cast<T>(static_cast<Acc>(dst[ih * g.W + iw]) + share);
          }
      }
    });
  });
  return result;
}

OpKernel<ops::max_pool2d> reg_max_pool2d(DispatchKey::CPU, &max_pool2d_cpu);
OpKernel<ops::avg_pool2d> reg_avg_pool2d(DispatchKey::CPU, &avg_pool2d_cpu);
OpKernel<ops::avg_pool2d_backward> reg_avg_pool2d_backward(DispatchKey::CPU, &avg_pool2d_backward_cpu);

}  // namespace
}  // namespace trainrun
