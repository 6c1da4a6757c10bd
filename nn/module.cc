#include "nn/module.h"

#include <set>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {
namespace nn {

Tensor Module::operator()(const Tensor& x) {
  Tensor input = x;
  for (const auto& hook : pre_hooks_) {
    Tensor replaced = hook(*this, input);
    if (replaced.defined()) input = replaced;
  }
  Tensor output = forward(input);
  for (const auto& hook : hooks_) {
    Tensor replaced = hook(*this, input, output);
    if (replaced.defined()) output = replaced;
  }
  return output;
}

Tensor Module::forward(const Tensor&) {
  throw NotImplementedError(fmt::format("{}: forward(Tensor) is not implemented", type_name_));
}

void Module::check_new_name(const std::string& name) const {
  TR_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError,
           "{}: '{}' is not a valid name (non-empty, no '.')", type_name_, name);
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  TR_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), ValueError, "{}: '{}' is already registered",
           type_name_, name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name);
  if (requires_grad) set_requires_grad(t);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(name);
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

Tensor& Module::param(const std::string& name) {
  for (auto& [n, t] : params_)
    if (n == name) return t;
  throw ValueError(fmt::format("{}: no parameter named '{}'", type_name_, name));
}

Tensor& Module::buffer(const std::string& name) {
  for (auto& [n, t] : buffers_)
    if (n == name) return t;
  throw ValueError(fmt::format("{}: no buffer named '{}'", type_name_, name));
}

Tensor Module::replace_parameter(const std::string& name, Tensor t, bool allow_reshape) {
  Tensor& slot = param(name);
  TR_CHECK(allow_reshape || t.sizes() == slot.sizes(), ValueError,
           "{}: replacing parameter '{}' of shape {} with shape {}", type_name_, name, slot.shape_str(), t.shape_str());
  Tensor old = slot;
  slot = std::move(t);
  return old;
}

void Module::collect(const std::string& prefix, bool params, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>* out) const {
  for (const auto& [n, t] : params ? params_ : buffers_) out->emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, child] : children_) child->collect(prefix + n + ".", params, true, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, recurse, &out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, recurse, &out);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out{{"", shared_from_this()}};
  for (const auto& [n, child] : children_)
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(sub.empty() ? n : n + "." + sub, m);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [_, child] : children_) child->apply(fn);
  fn(*this);
}

void Module::zero_grad(bool set_to_none) { trainrun::zero_grad(parameters(), set_to_none); }

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for (auto& [_, t] : params_) {
    if (!is_floating(t.dtype()) || t.dtype() == dtype) continue;
    const bool needs = requires_grad(t);
    t = detach(t).to(dtype);
    if (needs) set_requires_grad(t);
  }
  for (auto& [_, t] : buffers_)
    if (is_floating(t.dtype())) t = t.to(dtype);
  for (auto& [_, child] : children_) child->to(dtype);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& [_, t] : params_) {
    if (t.device() == device) continue;
    const bool needs = requires_grad(t);
    t = detach(t).to(device);
    if (needs) set_requires_grad(t);
  }
  for (auto& [_, t] : buffers_) t = t.to(device);
  for (auto& [_, child] : children_) child->to(device);
}

StateDict Module::state_dict() const {
  StateDict out;
  NoGradGuard no_grad;
  for (auto& [n, t] : named_parameters()) out[n] = clone(detach(t));
  for (auto& [n, t] : named_buffers()) out[n] = clone(t);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor>> own = named_parameters();
  for (auto& b : named_buffers()) own.push_back(b);
  std::set<std::string> seen, missing, unexpected;
  NoGradGuard no_grad;
  for (auto& [name, t] : own) {
    auto it = state.find(name);
    if (it == state.end()) {
      missing.insert(name);
      continue;
    }
    seen.insert(name);
    TR_CHECK(it->second.sizes() == t.sizes(), ValueError,
             "{}.load_state_dict: '{}' has shape {} in the state dict but {} in the module", type_name_, name,
             it->second.shape_str(), t.shape_str());
    Tensor dst = t;
    copy_(dst, it->second);
  }
  for (auto& [name, _] : state)
    if (!seen.count(name)) unexpected.insert(name);
  TR_CHECK(!strict || (missing.empty() && unexpected.empty()), ValueError,
           "{}.load_state_dict: missing keys [{}], unexpected keys [{}]", type_name_, fmt::join(missing, ", "),
           fmt::join(unexpected, ", "));
}

}  // namespace nn
}  // namespace trainrun
