#pragma once
// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {
namespace optim {

// Scales all gradients so that their joint p-norm is at most max_norm;
// returns the norm before clipping (a float64 scalar tensor).
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace optim
}  // namespace trainrun
