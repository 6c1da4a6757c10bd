#pragma once
// The module tree: named parameters, buffers and child modules, train/eval,
// state_dict, and forward hooks. Parameters live in the module's registry
// (not in member copies), so that a layer that wraps modules (FSDP) can
// swap them for sharded ones with replace_parameter.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {
namespace nn {

using StateDict = std::map<std::string, Tensor>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // Runs forward pre-hooks, forward, then forward hooks (which may replace the output).
  Tensor operator()(const Tensor& x);
  virtual Tensor forward(const Tensor& x);

  // Registration: names are unique among a module's parameters, buffers and children.
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    check_new_name(name);
    children_.emplace_back(name, m);
    return m;
  }

  // The parameter or buffer `name` of this module (not of children).
  Tensor& param(const std::string& name);
  Tensor& buffer(const std::string& name);
  // Puts t in place of parameter `name` (same shape unless allow_reshape); returns the old one.
  Tensor replace_parameter(const std::string& name, Tensor t, bool allow_reshape = false);

  // Dotted names ("0.weight"), depth first, in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // This module ("") and every descendant.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void apply(const std::function<void(Module&)>& fn);
  void zero_grad(bool set_to_none = true);
  // Converts floating parameters and buffers to dtype (in place in the registry).
  void to(DType dtype);
  // Moves every parameter and buffer to `device` (model.to("cuda") / .cuda()).
  void to(Device device);

  // Copies of every parameter and buffer, by dotted name.
  StateDict state_dict() const;
  // strict: missing and unexpected keys are errors (named in the message);
  // shape mismatches always are.
  void load_state_dict(const StateDict& state, bool strict = true);

  using ForwardPreHook = std::function<Tensor(Module&, const Tensor& input)>;  // may return a replacement input
  using ForwardHook = std::function<Tensor(Module&, const Tensor& input, const Tensor& output)>;
  void register_forward_pre_hook(ForwardPreHook hook) { pre_hooks_.push_back(std::move(hook)); }
  void register_forward_hook(ForwardHook hook) { hooks_.push_back(std::move(hook)); }

 private:
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool recurse,
               std::vector<std::pair<std::string, Tensor>>* out) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<ForwardPreHook> pre_hooks_;
  std::vector<ForwardHook> hooks_;
};

}  // namespace nn
}  // namespace trainrun
