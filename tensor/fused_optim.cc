#include "tensor/fused_optim.h"

#include "tensor/dispatcher.h"
#include "tensor/op_schemas.h"

namespace trainrun {

void fused_adam_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                 const AdamStep& args) {
  const char* op = "fused_adam_";
  TR_CHECK(is_floating(param.dtype()), TypeError, "{}: expected a floating parameter, got {}", op,
           dtype_name(param.dtype()));
  const std::pair<const char*, const Tensor*> others[] = {
      {"grad", &grad}, {"exp_avg", &exp_avg}, {"exp_avg_sq", &exp_avg_sq}, {"max_exp_avg_sq", &max_exp_avg_sq}};
  for (const auto& [name, t] : others) {
    if (t == &max_exp_avg_sq && !args.amsgrad) continue;
    TR_CHECK(t->defined() && t->sizes() == param.sizes() && t->dtype() == param.dtype() &&
                 t->device() == param.device() && t->is_contiguous(),
             ValueError, "{}: {} must be a contiguous {} tensor of shape {} like the parameter", op, name,
             dtype_name(param.dtype()), param.shape_str());
  }
  TR_CHECK(param.is_contiguous(), ValueError, "{}: the parameter must be contiguous", op);
  ops::fused_adam_::call(keys_of(param, grad), param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
  param.impl()->bump_version();
  exp_avg.impl()->bump_version();
  exp_avg_sq.impl()->bump_version();
  if (args.amsgrad) max_exp_avg_sq.impl()->bump_version();
}

}  // namespace trainrun
