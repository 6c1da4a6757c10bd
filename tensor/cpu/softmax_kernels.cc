// CPU softmax and log_softmax: max-subtracted per row; float32 rows use
// SLEEF's vector exp. Reduction along a non-last dim moves it last first.
#include <cmath>
#include <limits>

#include "tensor/cpu/vec_math.h"
#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

template <bool log_output>
void softmax_rows_f32(const float* x, float* y, int64_t rows, int64_t n) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      float m = vec::max(xr, n);
      if (std::isinf(m) && m < 0) m = 0;  // an all -inf row: exp gives 0s (and NaN after /0, as PyTorch)
      float s = vec::exp_shifted_sum(xr, yr, m, n);
      if (log_output) {
        float shift = m + std::log(s);
        for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] - shift;
      } else {
        float inv = 1.f / s;
        for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
      }
    }
  });
}

template <bool log_output, typename T>
void softmax_rows_generic(const T* x, T* y, int64_t rows, int64_t n) {
  using Acc = opmath_t<T>;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    std::vector<Acc> tmp(n);
    for (int64_t r = b; r < e; ++r) {
      const T* xr = x + r * n;
      Acc m = -std::numeric_limits<Acc>::infinity();
      for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<Acc>(xr[i]));
      if (std::isinf(m) && m < 0) m = 0;
      Acc s = 0;
      for (int64_t i = 0; i < n; ++i) { tmp[i] = std::exp(static_cast<Acc>(xr[i]) - m); s += tmp[i]; }
      Acc shift = m + std::log(s);
      for (int64_t i = 0; i < n; ++i)
        y[r * n + i] = static_cast<T>(log_output ? static_cast<Acc>(xr[i]) - shift : tmp[i] / s);
    }
  });
}

template <bool log_output>
Tensor softmax_cpu(const Tensor& x_in, int64_t dim) {
  const char* op = log_output ? "log_softmax" : "softmax";
  Tensor x = is_floating(x_in.dtype()) ? x_in : x_in.to(default_float_dtype());
  if (x.dim() == 0) return log_output ? zeros_like(x) : ones_like(x);
  dim = wrap_dim(dim, x.dim(), op);
  const bool last = dim == x.dim() - 1;
  Tensor rows = contiguous(last ? x : transpose(x, dim, -1));
  Tensor out = empty(rows.sizes(), x.dtype());
  int64_t n = rows.size(-1);
  int64_t nrows = n == 0 ? 0 : rows.numel() / n;
  visit_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(rows.data_ptr());
    T* py = static_cast<T*>(out.data_ptr());
    if constexpr (std::is_same<T, float>::value) softmax_rows_f32<log_output>(px, py, nrows, n);
    else softmax_rows_generic<log_output, T>(px, py, nrows, n);
  });
  return last ? out : contiguous(transpose(out, dim, -1));
}

OpKernel<ops::softmax> reg_softmax(DispatchKey::CPU, &softmax_cpu<false>);
OpKernel<ops::log_softmax> reg_log_softmax(DispatchKey::CPU, &softmax_cpu<true>);

}  // namespace
}  // namespace trainrun
