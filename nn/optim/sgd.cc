#include "nn/optim/sgd.h"

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {
namespace optim {
namespace {
Options to_options(const SGDOptions& o) {
  return {{"lr", o.lr}, {"momentum", o.momentum}, {"dampening", o.dampening}, {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0}, {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : SGD(std::vector<ParamGroup>{{std::move(params), {}}}, o) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions o) : Optimizer(std::move(groups), to_options(o), "SGD") {
  TR_CHECK(o.lr >= 0, ValueError, "SGD: invalid learning rate {}", o.lr);
  TR_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), ValueError,
           "SGD: nesterov momentum requires a momentum and zero dampening");
}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const double lr = option(g, "lr"), momentum = option(g, "momentum"), dampening = option(g, "dampening"),
                 wd = option(g, "weight_decay");
    const bool nesterov = option(g, "nesterov") != 0, maximize = option(g, "maximize") != 0;
    for (size_t i = 0; i < g.params.size(); ++i) {
      Tensor p = g.params[i];
      Tensor d = grad(p);
      if (!d.defined()) continue;
      if (maximize) d = neg(d);
      if (wd != 0) d = add(d, p, wd);
      if (momentum != 0) {
        auto& st = state_of(gi, i);
        auto it = st.find("momentum_buffer");
        if (it == st.end()) {
          it = st.emplace("momentum_buffer", clone(d)).first;
        } else {
          mul_(it->second, momentum);
          add_(it->second, d, 1 - dampening);
        }
        d = nesterov ? add(d, it->second, momentum) : it->second;
      }
      add_(p, d, -lr);
    }
  }
}

}  // namespace optim
}  // namespace trainrun
