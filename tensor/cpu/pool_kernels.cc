// CPU max_pool2d (with argmax indices for backward) and avg_pool2d.
#include <limits>
#include <tuple>

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
    parallel_for(0, g.planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t plane = b; plane < e; ++plane) {
        const T* src = px + plane * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh)
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            Acc best = -std::numeric_limits<Acc>::infinity();
            if (!std::numeric_limits<Acc>::has_infinity) best = std::numeric_limits<Acc>::lowest();
            int64_t best_i = -1;
            for (int64_t i = 0; i < g.kH; ++i) {
              int64_t ih = oh * g.sH - g.pH + i * g.dH;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t j = 0; j < g.kW; ++j) {
                int64_t iw = ow * g.sW - g.pW + j * g.dW;
                if (iw < 0 || iw >= g.W) continue;
                Acc v = static_cast<Acc>(src[ih * g.W + iw]);
                if (v > best || v != v || best_i < 0) {
                  best = v;
                  best_i = ih * g.W + iw;
                  if (v != v) break;
                }
              }
            }
            int64_t o = (plane * g.Ho + oh) * g.Wo + ow;
            po[o] = static_cast<T>(best);
            pi[o] = best_i;
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
