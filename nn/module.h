#pragma once
// The module tree: named parameters, buffers and child modules, train/eval,
// state_dict, and forward hooks. Parameters live in the module's registry
// (not in member copies), so that a layer that wraps modules (FSDP) can
// swap them for sharded ones with replace_parameter.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {
namespace nn {

using StateDict = std::map<std::string, Tensor>;
// What a module takes and returns: any number of tensors (an attention block
// takes (x, mask); a pipeline stage may return several activations).
using TensorList = std::vector<Tensor>;

// Returned by the hook registrations; remove_hook(handle) unregisters.
struct HookHandle {
  uint64_t id = 0;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // Runs forward pre-hooks, forward, then forward hooks; each hook may
  // replace what it sees (the arguments, or the outputs).
  TensorList operator()(const TensorList& inputs);
  // One tensor in, one out (throws ValueError naming the module when forward
  // returns another number of tensors).
  Tensor operator()(const Tensor& x);

  // A module overrides one of the two. The list form is the general one; by
  // default it passes a single input to the one-tensor form, and the
  // one-tensor form calls the list form with one input.
  virtual TensorList forward(const TensorList& inputs);
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

  // Removes the parameter, buffer or child `name` (torch's `del module.name`; pipeline stages drop the
  // layers other stages own, keeping the names of the rest); returns whether there was one.
  bool unregister(const std::string& name);
  // Puts m in place of child `name`, where it was (torch's `model.mlp = compiled`); returns whether there was one.
  bool replace_module(const std::string& name, std::shared_ptr<Module> m);

  // The parameter or buffer `name` of this module (not of children).
  Tensor& param(const std::string& name);
  Tensor& buffer(const std::string& name);
  // The same, or nullptr when there is none (attribute lookups, where a miss is no error).
  const Tensor* find_param(const std::string& name) const;
  const Tensor* find_buffer(const std::string& name) const;
  // Puts t in place of parameter `name` (same shape unless allow_reshape); returns the old one.
  Tensor replace_parameter(const std::string& name, Tensor t, bool allow_reshape = false);

  // Dotted names ("0.weight"), depth first, in registration order. A tensor
  // registered under several names (tied weights) comes once, under its
  // first name, unless remove_duplicate is false (state_dict keeps every name).
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true,
                                                               bool remove_duplicate = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true, bool remove_duplicate = true) const;
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

  // Every parameter and buffer by dotted name, detached but sharing their
  // storage (PyTorch's semantics: copy them to keep a snapshot).
  StateDict state_dict() const;
  // strict: missing and unexpected keys are errors (named in the message);
  // shape mismatches always are.
  void load_state_dict(const StateDict& state, bool strict = true);

  // PyTorch's forward hooks over lists: a pre-hook may return replacement
  // arguments, a hook replacement outputs (nullopt keeps them). prepend runs
  // the hook before those already registered.
  using ForwardPreHook = std::function<std::optional<TensorList>(Module&, const TensorList& args)>;
  using ForwardHook =
      std::function<std::optional<TensorList>(Module&, const TensorList& args, const TensorList& outputs)>;
  HookHandle register_forward_pre_hook(ForwardPreHook hook, bool prepend = false);
  HookHandle register_forward_hook(ForwardHook hook, bool prepend = false);
  // Returns whether the hook was registered (and is now removed).
  bool remove_hook(HookHandle handle);

 private:
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool recurse,
               std::vector<std::pair<std::string, Tensor>>* out) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<uint64_t, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<uint64_t, ForwardHook>> hooks_;
  uint64_t next_hook_id_ = 1;
};

}  // namespace nn
}  // namespace trainrun
