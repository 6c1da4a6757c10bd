#pragma once
// torch.autograd.graph.saved_tensors_hooks: while a pair of hooks is active on this thread, every tensor an
// autograd node saves for backward goes through pack (which may keep it elsewhere: on the CPU, on disk, or
// nothing but a recipe to recompute it) and comes back through unpack when backward needs it. The innermost
// active pair applies; a node keeps the pair it saved with, so backward (on any thread) unpacks with it.
#include <functional>
#include <memory>
#include <string>

#include "tensor/tensor.h"

namespace trainrun {

struct SavedTensorHooks {
  // Returns what stands for the tensor until backward (opaque here: a Python object for Python hooks).
  std::function<std::shared_ptr<void>(const Tensor&)> pack;
  std::function<Tensor(const std::shared_ptr<void>&)> unpack;
  // Non-empty: saving a tensor is refused with this message (disable_saved_tensors_hooks).
  std::string disabled_message;
};

void push_saved_tensor_hooks(std::shared_ptr<const SavedTensorHooks> hooks);
void pop_saved_tensor_hooks();
// The innermost active pair on this thread, or null.
std::shared_ptr<const SavedTensorHooks> current_saved_tensor_hooks();

}  // namespace trainrun
