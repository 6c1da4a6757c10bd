// CPU kernel of the fused Adam/AdamW update: one pass, split across threads,
// with the same arithmetic (and order of operations) as the op-by-op form
// in nn/optim/adam.cc, so that both agree to rounding.
#include <cmath>

#include "tensor/dispatcher.h"
#include "tensor/dtype_visit.h"
#include "tensor/fused_optim.h"
#include "tensor/thread_pool.h"

namespace trainrun {
namespace {

template <typename T>
void adam_range(T* p, const T* g_in, T* m, T* v, T* vmax, int64_t begin, int64_t end, const AdamStep& a) {
  const T b1 = static_cast<T>(a.beta1), b2 = static_cast<T>(a.beta2);
  const T one_minus_b1 = static_cast<T>(1 - a.beta1), one_minus_b2 = static_cast<T>(1 - a.beta2);
  const T wd = static_cast<T>(a.weight_decay), eps = static_cast<T>(a.eps);
  const T decay = static_cast<T>(1 - a.lr * a.weight_decay);
  const T bc2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(a.beta2, a.step)));
  const T neg_step_size = static_cast<T>(-a.lr / (1 - std::pow(a.beta1, a.step)));
  for (int64_t i = begin; i < end; ++i) {
    T g = a.maximize ? -g_in[i] : g_in[i];
    T w = p[i];
    if (a.weight_decay != 0) {
      if (a.decoupled)
        w = w * decay;
      else
        g = g + wd * w;
    }
    // lerp(m, g, 1 - beta1) in PyTorch's form (the weight is below 0.5 for
    // every usual beta1 >= 0.5; the other branch keeps the equivalence).
    const T mi = one_minus_b1 < T(0.5) ? m[i] + one_minus_b1 * (g - m[i]) : g - (g - m[i]) * b1;
    const T vi = v[i] * b2 + one_minus_b2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    T second = vi;
    if (a.amsgrad) {
      second = vmax[i] > vi ? vmax[i] : vi;
      vmax[i] = second;
    }
    const T denom = std::sqrt(second) / bc2_sqrt + eps;
    p[i] = w + neg_step_size * (mi / denom);
  }
}

void fused_adam_cpu(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                    const AdamStep& args) {
  visit_float_dtype(param.dtype(), "fused_adam_", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value) {
      T* p = static_cast<T*>(param.data_ptr());
      const T* g = static_cast<const T*>(grad.data_ptr());
      T* m = static_cast<T*>(exp_avg.data_ptr());
      T* v = static_cast<T*>(exp_avg_sq.data_ptr());
      T* vmax = args.amsgrad ? static_cast<T*>(max_exp_avg_sq.data_ptr()) : nullptr;
      parallel_for(0, param.numel(), 1 << 14,
                   [&](int64_t b, int64_t e) { adam_range<T>(p, g, m, v, vmax, b, e, args); });
    } else {
      throw TypeError(
          fmt::format("fused_adam_: {} parameters are not supported; use fused=false", dtype_name(param.dtype())));
    }
  });
}

KernelRegistration<void(Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&, const AdamStep&)> reg_fused_adam(
    "fused_adam_", DispatchKey::CPU, &fused_adam_cpu);

}  // namespace
}  // namespace trainrun
