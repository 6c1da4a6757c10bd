// CPU kernel of the fused Adam/AdamW update: one pass, split across threads,
// with tensor/adam_update.h's arithmetic.
#include <cmath>

#include "tensor/adam_update.h"
#include "tensor/dispatcher.h"
#include "tensor/dtype_visit.h"
#include "tensor/fused_optim.h"
#include "tensor/op_schemas.h"
#include "tensor/thread_pool.h"

namespace trainrun {
namespace {

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
      const AdamCoefficients<T> c = adam_coefficients<T>(args.lr, args.beta1, args.beta2, args.eps, args.weight_decay,
                                                         args.step, args.amsgrad, args.maximize, args.decoupled);
      parallel_for(0, param.numel(), 1 << 14, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) adam_element(p, g, m, v, vmax, i, c);
      });
    } else {
      throw TypeError(
          fmt::format("fused_adam_: {} parameters are not supported; use fused=false", dtype_name(param.dtype())));
    }
  });
}

OpKernel<ops::fused_adam_> reg_fused_adam(DispatchKey::CPU, &fused_adam_cpu);

}  // namespace
}  // namespace trainrun
