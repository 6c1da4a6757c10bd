#pragma once
// torch.optim.Adam and AdamW (decoupled weight decay): betas, eps,
// weight_decay, amsgrad, maximize.
#include "nn/optim/optimizer.h"

namespace trainrun {
namespace optim {

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false;
  // One pass per parameter (tensor/fused_optim.h) where the kernel applies
  // (contiguous float32/float64); false: the op-by-op form. Both give the
  // same results to rounding. (PyTorch's default is the op-by-op form.)
  bool fused = true;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  void step() override;

 protected:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled, const char* name);
  bool decoupled_;
};

// weight_decay defaults to 1e-2 as in PyTorch; pass it explicitly to AdamOptions.
class AdamW final : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, true, "AdamW") {}
};

}  // namespace optim
}  // namespace trainrun
