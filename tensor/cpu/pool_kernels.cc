// CPU max_pool2d (with argmax indices for backward) and avg_pool2d.
#include <limits>
#include <tuple>

#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {

int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

namespace {

struct PoolGeometry {
  int64_t planes, H, W, Ho, Wo, kH, kW, sH, sW, pH, pW, dH, dW;
  IntList out_shape;
};

PoolGeometry pool_geometry(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, const IntList& d,
                           bool ceil_mode, const char* op) {
  TR_CHECK(x.dim() == 3 || x.dim() == 4, ValueError, "{}: expected a 3-D or 4-D input, got shape {}", op, x.shape_str());
  auto pair = [&](const IntList& v, const IntList& dflt, const char* name) {
    IntList r = v.empty() ? dflt : v.size() == 1 ? IntList{v[0], v[0]} : v;
    TR_CHECK(r.size() == 2, ValueError, "{}: {} must have 1 or 2 values, got [{}]", op, name, fmt::join(v, ", "));
    return r;
  };
  IntList kk = pair(k, {}, "kernel_size"), ss = pair(s, kk, "stride"), pp = pair(p, {0, 0}, "padding"),
          dd = pair(d, {1, 1}, "dilation");
  TR_CHECK(kk[0] > 0 && kk[1] > 0 && ss[0] > 0 && ss[1] > 0 && dd[0] > 0 && dd[1] > 0, ValueError,
           "{}: kernel_size, stride and dilation must be positive", op);
  TR_CHECK(pp[0] >= 0 && pp[1] >= 0 && pp[0] * 2 <= kk[0] && pp[1] * 2 <= kk[1], ValueError,
           "{}: padding [{}] must be non-negative and at most half the kernel size [{}]", op, fmt::join(pp, ", "),
           fmt::join(kk, ", "));
  PoolGeometry g;
  g.H = x.size(-2);
  g.W = x.size(-1);
  g.planes = x.numel() / std::max<int64_t>(g.H * g.W, 1);
  g.kH = kk[0]; g.kW = kk[1]; g.sH = ss[0]; g.sW = ss[1]; g.pH = pp[0]; g.pW = pp[1]; g.dH = dd[0]; g.dW = dd[1];
  g.Ho = pool_out_size(g.H, g.kH, g.sH, g.pH, g.dH, ceil_mode);
  g.Wo = pool_out_size(g.W, g.kW, g.sW, g.pW, g.dW, ceil_mode);
  TR_CHECK(g.Ho > 0 && g.Wo > 0, ValueError, "{}: output size is {}x{} for input {}: too small for the kernel", op,
           g.Ho, g.Wo, x.shape_str());
  g.out_shape = IntList(x.sizes().begin(), x.sizes().end() - 2);
  g.out_shape.push_back(g.Ho);
  g.out_shape.push_back(g.Wo);
  return g;
}

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

// The input rows [h0, h1) and columns [w0, w1) an avg_pool2d window covers,
// and PyTorch's divisor for it: the window clipped to the padded input
// (count_include_pad) or to the input itself.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

AvgWindow avg_window(const PoolGeometry& g, int64_t oh, int64_t ow, bool count_include_pad) {
  int64_t h0 = oh * g.sH - g.pH, w0 = ow * g.sW - g.pW;
  int64_t h1 = std::min(h0 + g.kH, g.H + g.pH), w1 = std::min(w0 + g.kW, g.W + g.pW);
  const int64_t padded_count = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.H);
  w1 = std::min(w1, g.W);
  const int64_t count = count_include_pad ? padded_count : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, std::max<int64_t>(count, 1)};
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

KernelRegistration<std::tuple<Tensor, Tensor>(const Tensor&, const IntList&, const IntList&, const IntList&,
                                              const IntList&, bool)>
    reg_max_pool2d("max_pool2d", DispatchKey::CPU, &max_pool2d_cpu);
KernelRegistration<Tensor(const Tensor&, const IntList&, const IntList&, const IntList&, bool, bool)> reg_avg_pool2d(
    "avg_pool2d", DispatchKey::CPU, &avg_pool2d_cpu);
KernelRegistration<Tensor(const Tensor&, const Tensor&, const IntList&, const IntList&, const IntList&, bool, bool)>
    reg_avg_pool2d_backward("avg_pool2d_backward", DispatchKey::CPU, &avg_pool2d_backward_cpu);

}  // namespace
}  // namespace trainrun
