#include "nn/optim/optimizer.h"

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {
namespace optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, Options defaults, std::string name)
    : name_(std::move(name)), defaults_(std::move(defaults)) {
  TR_CHECK(!groups.empty(), ValueError, "{}: got an empty parameter list", name_);
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  for (size_t i = 0; i < group.params.size(); ++i)
    TR_CHECK(is_leaf(group.params[i]) && requires_grad(group.params[i]), ValueError,
             "{}: parameter {} of group {} is not a leaf tensor that requires grad", name_, i, groups_.size());
  for (auto& [k, v] : defaults_) group.options.emplace(k, v);
  for (auto& [k, _] : group.options)
    TR_CHECK(defaults_.count(k), ValueError, "{}: unknown option '{}'", name_, k);
  state_.emplace_back(group.params.size());
  groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_) trainrun::zero_grad(g.params, set_to_none);
}

std::map<std::string, Tensor>& Optimizer::state_of(size_t group, size_t index) { return state_[group][index]; }

double Optimizer::option(const ParamGroup& g, const char* name) const {
  auto it = g.options.find(name);
  TR_CHECK(it != g.options.end(), ValueError, "{}: missing option '{}'", name_, name);
  return it->second;
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    out.groups.push_back(groups_[g].options);
    for (const auto& s : state_[g]) {
      std::map<std::string, Tensor> copy;
      for (const auto& [k, t] : s) copy[k] = clone(t);
      out.state.push_back(std::move(copy));
    }
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& in) {
  TR_CHECK(in.groups.size() == groups_.size(), ValueError, "{}.load_state_dict: {} parameter groups, expected {}",
           name_, in.groups.size(), groups_.size());
  size_t total = 0;
  for (auto& g : groups_) total += g.params.size();
  TR_CHECK(in.state.size() == total, ValueError, "{}.load_state_dict: state for {} parameters, expected {}", name_,
           in.state.size(), total);
  NoGradGuard no_grad;
  size_t k = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].options = in.groups[g];
    for (size_t i = 0; i < groups_[g].params.size(); ++i, ++k) {
      std::map<std::string, Tensor> copy;
      for (const auto& [key, t] : in.state[k]) copy[key] = clone(t);
      state_[g][i] = std::move(copy);
    }
  }
}

}  // namespace optim
}  // namespace trainrun
