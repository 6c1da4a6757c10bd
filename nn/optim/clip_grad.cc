#include "nn/optim/clip_grad.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {
namespace optim {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  TR_CHECK(max_norm >= 0, ValueError, "clip_grad_norm_: max_norm must be non-negative, got {}", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (grad(p).defined()) grads.push_back(grad(p));
  double total = 0;
  const bool inf = std::isinf(norm_type);
  for (const Tensor& g : grads) {
    double n = norm(g.to(DType::Float64), norm_type).item<double>();
    total = inf ? std::max(total, n) : total + std::pow(n, norm_type);
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1)
    for (Tensor g : grads) mul_(g, coef);
  return full({}, total, DType::Float64);
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = grad(p);
    if (g.defined()) clamp_(g, -clip_value, clip_value);
  }
}

}  // namespace optim
}  // namespace trainrun
