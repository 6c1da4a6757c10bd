#pragma once
// Optimizer updates fused into one pass over each parameter, as PyTorch's
// fused=True optimizers are: Adam reads param, grad and both moments once
// and writes them once, instead of about eight elementwise passes.
#include "tensor/tensor.h"

namespace trainrun {

struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  double step;  // this update's step count (1 for the first)
  bool amsgrad, maximize;
  bool decoupled;  // AdamW: decay the parameter, not the gradient
};

// Updates param, exp_avg and exp_avg_sq (and max_exp_avg_sq when amsgrad)
// in place with torch.optim.Adam's (or AdamW's) arithmetic. All tensors:
// the same shape, floating dtype and device, contiguous.
void fused_adam_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                 const AdamStep& args);

}  // namespace trainrun
