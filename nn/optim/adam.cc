#include "nn/optim/adam.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {
namespace optim {
namespace {
Options to_options(const AdamOptions& o) {
  return {{"lr", o.lr},   {"beta1", o.beta1},
          {"beta2", o.beta2}, {"eps", o.eps},
          {"weight_decay", o.weight_decay}, {"amsgrad", o.amsgrad ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}, {"fused", o.fused ? 1.0 : 0.0}};
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Adam(std::move(params), o, false, "Adam") {}

Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled, const char* name)
    : Optimizer({ParamGroup{std::move(params), {}}}, to_options(o), name), decoupled_(decoupled) {
  TR_CHECK(o.lr >= 0 && o.eps >= 0, ValueError, "{}: invalid lr {} or eps {}", name, o.lr, o.eps);
  TR_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, ValueError,
           "{}: betas must be in [0, 1), got ({}, {})", name, o.beta1, o.beta2);
}

void Adam::step() {
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const double lr = option(g, "lr"), b1 = option(g, "beta1"), b2 = option(g, "beta2"), eps = option(g, "eps"),
                 wd = option(g, "weight_decay");
    const bool amsgrad = option(g, "amsgrad") != 0, maximize = option(g, "maximize") != 0;
    const bool fused = option(g, "fused") != 0;
    for (size_t i = 0; i < g.params.size(); ++i) {
      Tensor p = g.params[i];
      Tensor d = grad(p);
      if (!d.defined()) continue;
      auto& st = state_of(gi, i);
      if (!st.count("step")) {
        st["step"] = zeros({}, DType::Float64);
        st["exp_avg"] = zeros(p.sizes(), TensorOptions(p.dtype(), p.device()));
        st["exp_avg_sq"] = zeros(p.sizes(), TensorOptions(p.dtype(), p.device()));
        if (amsgrad) st["max_exp_avg_sq"] = zeros(p.sizes(), TensorOptions(p.dtype(), p.device()));
      }
      add_(st["step"], 1.0);
      const double step = st["step"].item<double>();
      const bool fusable = (p.dtype() == DType::Float32 || p.dtype() == DType::Float64) && p.is_contiguous() &&
                           d.is_contiguous() && d.dtype() == p.dtype() && st["exp_avg"].is_contiguous() &&
                           st["exp_avg_sq"].is_contiguous() && (!amsgrad || st["max_exp_avg_sq"].is_contiguous());
      if (fused && fusable) {
        Tensor none;
        fused_adam_(p, d, st["exp_avg"], st["exp_avg_sq"], amsgrad ? st["max_exp_avg_sq"] : none,
                    AdamStep{lr, b1, b2, eps, wd, step, amsgrad, maximize, decoupled_});
        continue;
      }
      if (maximize) d = neg(d);
      if (wd != 0) {
        if (decoupled_)
          mul_(p, 1 - lr * wd);
        else
          d = add(d, p, wd);
      }
      Tensor& m = st["exp_avg"];
      Tensor& v = st["exp_avg_sq"];
      lerp_(m, d, 1 - b1);
      mul_(v, b2);
      addcmul_(v, d, d, 1 - b2);
      const double bc1 = 1 - std::pow(b1, step), bc2_sqrt = std::sqrt(1 - std::pow(b2, step));
      // One temporary per parameter: sqrt, then scaled and shifted in place.
      Tensor denom;
      if (amsgrad) {
        Tensor& vmax = st["max_exp_avg_sq"];
        maximum_(vmax, v);
        denom = sqrt(vmax);
      } else {
        denom = sqrt(v);
      }
      div_(denom, bc2_sqrt);
      add_(denom, eps);
      addcdiv_(p, m, denom, -lr / bc1);
    }
  }
}

}  // namespace optim
}  // namespace trainrun
