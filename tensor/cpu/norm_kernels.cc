// CPU layer_norm and rms_norm over the trailing `normalized_shape` dims,
// returning the statistics backward needs (mean and rstd per row).
#include <cmath>
#include <tuple>

#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/nn_shapes.h"
#include "tensor/op_schemas.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

template <bool rms>
std::tuple<Tensor, Tensor, Tensor> norm_cpu(const Tensor& x_in, const IntList& normalized_shape, const Tensor& weight,
                                             const Tensor& bias, double eps) {
  const char* op = rms ? "rms_norm" : "layer_norm";
  NormShape s = check_norm(x_in, normalized_shape, weight, bias, op);
  Tensor x = contiguous(x_in);
  Tensor out = empty(x.sizes(), x.dtype());
  Tensor mean_t = empty(s.stat_shape, x.dtype()), rstd_t = empty(s.stat_shape, x.dtype());
  Tensor w = weight.defined() ? contiguous(weight.to(x.dtype())) : Tensor();
  Tensor bb = bias.defined() ? contiguous(bias.to(x.dtype())) : Tensor();
  visit_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const T* px = static_cast<const T*>(x.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    T* pm = static_cast<T*>(mean_t.data_ptr());
    T* pr = static_cast<T*>(rstd_t.data_ptr());
    const T* pw = w.defined() ? static_cast<const T*>(w.data_ptr()) : nullptr;
    const T* pb = bb.defined() ? static_cast<const T*>(bb.data_ptr()) : nullptr;
    const int64_t n = s.n;
    parallel_for(0, s.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = px + r * n;
        T* orow = po + r * n;
        // Two passes with 8 accumulators each: vectorizable and accurate.
        Acc acc[8] = {};
        Acc mean = 0;
        if (!rms) {
          int64_t i = 0;
          for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += static_cast<Acc>(xr[i + j]);
          Acc sum = 0;
          for (; i < n; ++i) sum += static_cast<Acc>(xr[i]);
          for (Acc a : acc) sum += a;
          mean = sum / n;
        }
        Acc sq[8] = {};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
          for (int j = 0; j < 8; ++j) {
            Acc d = static_cast<Acc>(xr[i + j]) - mean;
            sq[j] += d * d;
          }
        Acc ss = 0;
        for (; i < n; ++i) {
          Acc d = static_cast<Acc>(xr[i]) - mean;
          ss += d * d;
        }
        for (Acc a : sq) ss += a;
        Acc rstd = Acc(1) / std::sqrt(ss / n + static_cast<Acc>(eps));
        pm[r] = static_cast<T>(mean);
        pr[r] = static_cast<T>(rstd);
        // Branch-free loops per case, so each vectorizes.
        if (pw && pb) {
          for (int64_t k = 0; k < n; ++k)
            orow[k] = static_cast<T>((static_cast<Acc>(xr[k]) - mean) * rstd * static_cast<Acc>(pw[k]) + static_cast<Acc>(pb[k]));
        } else if (pw) {
          for (int64_t k = 0; k < n; ++k)
            orow[k] = static_cast<T>((static_cast<Acc>(xr[k]) - mean) * rstd * static_cast<Acc>(pw[k]));
        } else {
          for (int64_t k = 0; k < n; ++k) {
            Acc v = (static_cast<Acc>(xr[k]) - mean) * rstd;
            orow[k] = static_cast<T>(pb ? v + static_cast<Acc>(pb[k]) : v);
          }
        }
      }
    });
  });
  return {out, mean_t, rstd_t};
}

OpKernel<ops::layer_norm> reg_layer_norm(DispatchKey::CPU, &norm_cpu<false>);
OpKernel<ops::rms_norm> reg_rms_norm(DispatchKey::CPU, &norm_cpu<true>);

}  // namespace
}  // namespace trainrun
