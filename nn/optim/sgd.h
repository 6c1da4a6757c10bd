#pragma once
// torch.optim.SGD: momentum, dampening, nesterov, weight_decay, maximize.
#include "nn/optim/optimizer.h"

namespace trainrun {
namespace optim {

struct SGDOptions {
  double lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults);
  void step() override;
};

}  // namespace optim
}  // namespace trainrun
