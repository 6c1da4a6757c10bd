#include "nn/module.h"

#include <set>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/graph_break.h"
#include "tensor/ops.h"

namespace trainrun {
namespace nn {

TensorList Module::operator()(const TensorList& inputs) {
  if (pre_hooks_.empty() && hooks_.empty()) return forward(inputs);
  note_graph_break("a module with forward hooks ran (hooks are code a recorded graph does not run)");
  TensorList args = inputs;
  // Copies: a hook may register or remove hooks while it runs.
  const auto pre_hooks = pre_hooks_;
  for (const auto& [id, hook] : pre_hooks)
    if (std::optional<TensorList> replaced = hook(*this, args)) args = std::move(*replaced);
  TensorList outputs = forward(args);
  const auto hooks = hooks_;
  for (const auto& [id, hook] : hooks)
    if (std::optional<TensorList> replaced = hook(*this, args, outputs)) outputs = std::move(*replaced);
  return outputs;
}

Tensor Module::operator()(const Tensor& x) {
  TensorList outputs = (*this)(TensorList{x});
  TR_CHECK(outputs.size() == 1, ValueError, "{}: called with one tensor, forward returned {} tensors (call it with a list)",
           type_name_, outputs.size());
  return outputs[0];
}

namespace {

// The module whose default forward is running on this thread: the two
// defaults call each other, and a module that overrides neither must fail
// instead of recursing.
thread_local const Module* g_in_default_forward = nullptr;

class DefaultForwardScope {
 public:
  explicit DefaultForwardScope(const Module* m) : saved_(g_in_default_forward) { g_in_default_forward = m; }
  ~DefaultForwardScope() { g_in_default_forward = saved_; }

 private:
  const Module* saved_;
};

}  // namespace

TensorList Module::forward(const TensorList& inputs) {
  TR_CHECK(g_in_default_forward != this, NotImplementedError,
           "{}: forward is not implemented (override forward(Tensor) or forward(TensorList))", type_name_);
  TR_CHECK(inputs.size() == 1, TypeError, "{}: forward takes one tensor, got {}", type_name_, inputs.size());
  DefaultForwardScope scope(this);
  return {forward(inputs[0])};
}

Tensor Module::forward(const Tensor& x) {
  TR_CHECK(g_in_default_forward != this, NotImplementedError,
           "{}: forward is not implemented (override forward(Tensor) or forward(TensorList))", type_name_);
  DefaultForwardScope scope(this);
  TensorList outputs = forward(TensorList{x});
  TR_CHECK(outputs.size() == 1, ValueError, "{}: forward(Tensor) needs one output, forward returned {}", type_name_,
           outputs.size());
  return outputs[0];
}

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook, bool prepend) {
  const uint64_t id = next_hook_id_++;
  pre_hooks_.emplace(prepend ? pre_hooks_.begin() : pre_hooks_.end(), id, std::move(hook));
  return {id};
}

HookHandle Module::register_forward_hook(ForwardHook hook, bool prepend) {
  const uint64_t id = next_hook_id_++;
  hooks_.emplace(prepend ? hooks_.begin() : hooks_.end(), id, std::move(hook));
  return {id};
}

bool Module::remove_hook(HookHandle handle) {
  auto erase = [&](auto& list) {
    for (auto it = list.begin(); it != list.end(); ++it)
      if (it->first == handle.id) {
        list.erase(it);
        return true;
      }
    return false;
  };
  return erase(pre_hooks_) || erase(hooks_);
}

bool Module::unregister(const std::string& name) {
  auto drop = [&](auto& list) {
    for (auto it = list.begin(); it != list.end(); ++it)
      if (it->first == name) {
        list.erase(it);
        return true;
      }
    return false;
  };
  return drop(params_) || drop(buffers_) || drop(children_);
}

bool Module::replace_module(const std::string& name, std::shared_ptr<Module> m) {
  for (auto& [n, child] : children_)
    if (n == name) {
      child = std::move(m);
      return true;
    }
  return false;
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

const Tensor* Module::find_param(const std::string& name) const {
  for (const auto& [n, t] : params_)
    if (n == name) return &t;
  return nullptr;
}

const Tensor* Module::find_buffer(const std::string& name) const {
  for (const auto& [n, t] : buffers_)
    if (n == name) return &t;
  return nullptr;
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

namespace {
// Keeps the first name of each tensor (by TensorImpl identity).
std::vector<std::pair<std::string, Tensor>> first_names(std::vector<std::pair<std::string, Tensor>> named) {
  std::set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(named.size());
  for (auto& entry : named) {
    if (seen.insert(entry.second.impl()).second) out.push_back(std::move(entry));
  }
  return out;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse, bool remove_duplicate) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, recurse, &out);
  return remove_duplicate ? first_names(std::move(out)) : out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse, bool remove_duplicate) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, recurse, &out);
  return remove_duplicate ? first_names(std::move(out)) : out;
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
  // Detached views of the module's own tensors, as PyTorch's: loading into them in place (a distributed
  // checkpoint's load) updates the module; copy them to keep a snapshot.
  for (auto& [n, t] : named_parameters(true, false)) out[n] = detach(t);
  for (auto& [n, t] : named_buffers(true, false)) out[n] = detach(t);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor>> own = named_parameters(true, false);
  for (auto& b : named_buffers(true, false)) own.push_back(b);
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
