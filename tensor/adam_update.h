#pragma once
// One element of the fused Adam/AdamW update, shared by the CPU kernel
// (cpu/optim_kernels.cc) and the CUDA one (cuda/kernels/row_kernels.cu): the
// same arithmetic, in the same order, as the op-by-op form in
// nn/optim/adam.cc, so that all three agree to rounding.
#include <cmath>
#include <cstdint>

#include "tensor/host_device.h"

namespace trainrun {

// The step's constants in the parameter's type, computed once per step.
template <typename T>
struct AdamCoefficients {
  T b1, b2, one_minus_b1, one_minus_b2, wd, eps, decay, bc2_sqrt, neg_step_size;
  bool weight_decay, decoupled, amsgrad, maximize;
};

template <typename T>
AdamCoefficients<T> adam_coefficients(double lr, double beta1, double beta2, double eps, double weight_decay,
                                      double step, bool amsgrad, bool maximize, bool decoupled) {
  return {static_cast<T>(beta1),
          static_cast<T>(beta2),
          static_cast<T>(1 - beta1),
          static_cast<T>(1 - beta2),
          static_cast<T>(weight_decay),
          static_cast<T>(eps),
          static_cast<T>(1 - lr * weight_decay),
          static_cast<T>(std::sqrt(1 - std::pow(beta2, step))),
          static_cast<T>(-lr / (1 - std::pow(beta1, step))),
          weight_decay != 0,
          decoupled,
          amsgrad,
          maximize};
}

// Updates element i of the parameter and its moments (vmax: amsgrad only).
template <typename T>
TR_HOST_DEVICE inline void adam_element(T* p, const T* g_in, T* m, T* v, T* vmax, int64_t i,
                                        const AdamCoefficients<T>& c) {
  T g = c.maximize ? -g_in[i] : g_in[i];
  T w = p[i];
  if (c.weight_decay) {
    if (c.decoupled)
      w = w * c.decay;
    else
      g = g + c.wd * w;
  }
  // lerp(m, g, 1 - beta1) in PyTorch's form (the weight is below 0.5 for
  // every usual beta1 >= 0.5; the other branch keeps the equivalence).
  const T mi = c.one_minus_b1 < T(0.5) ? m[i] + c.one_minus_b1 * (g - m[i]) : g - (g - m[i]) * c.b1;
  const T vi = v[i] * c.b2 + c.one_minus_b2 * (g * g);
  m[i] = mi;
  v[i] = vi;
  T second = vi;
  if (c.amsgrad) {
    second = vmax[i] > vi ? vmax[i] : vi;
    vmax[i] = second;
  }
#ifdef __CUDA_ARCH__
  const T denom = sqrt(second) / c.bc2_sqrt + c.eps;
#else
  const T denom = std::sqrt(second) / c.bc2_sqrt + c.eps;  // the float overload: it vectorizes
#endif
  p[i] = w + c.neg_step_size * (mi / denom);
}

}  // namespace trainrun
