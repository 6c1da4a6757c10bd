#pragma once
// Autograd's view of a tensor: requires_grad, .grad, grad_fn, hooks. tensor/
// knows nothing of this; the metadata lives in TensorImpl's autograd slot,
// and a tensor that requires grad carries DispatchKey::Autograd so that ops
// reach their autograd kernels.
#include <functional>
#include <memory>

#include "autograd/node.h"

namespace trainrun {

struct AutogradMeta final : AutogradMetaInterface {
  bool requires_grad = false;  // set on leaves by the user
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;         // which output of grad_fn this tensor is
  std::weak_ptr<Node> grad_accumulator;
  // A leaf's register_hook hooks. They live here, not only on the
  // accumulator: that node is held weakly and made anew for each graph, and
  // a hook kept on it alone was lost with it.
  std::vector<std::function<Tensor(const Tensor&)>> leaf_hooks;
  std::vector<std::function<void(const Tensor&)>> post_accumulate_grad_hooks;
  std::shared_ptr<Tensor> retained_grad;  // set by retain_grad() on a non-leaf
  // A view made while autograd records: the tensor whose storage it reads (the root of a chain of views), and
  // the shared version counter's value when this view's history was last set (view_history.h).
  Tensor view_base;
  uint64_t view_version = 0;
};

// The tensor's metadata, or null when it has none.
AutogradMeta* autograd_meta(const Tensor& t);

// Marks a leaf as needing gradients (floating dtypes only).
Tensor& set_requires_grad(Tensor& t, bool requires_grad = true);
bool requires_grad(const Tensor& t);
bool is_leaf(const Tensor& t);
std::shared_ptr<Node> grad_fn(const Tensor& t);
// The accumulated gradient of a leaf (or of a tensor that retains grad).
Tensor grad(const Tensor& t);
void set_grad(const Tensor& t, const Tensor& grad);
// A tensor sharing t's data (and version counter) outside any graph.
Tensor detach(const Tensor& t);
// Clears the .grad of each tensor: drops it (set_to_none) or zeroes it in
// place (Module::zero_grad and Optimizer::zero_grad).
void zero_grad(const std::vector<Tensor>& tensors, bool set_to_none = true);
// Keeps the gradient of a non-leaf in grad() after backward.
void retain_grad(const Tensor& t);

// Runs on the gradient computed for t during backward, before it is used
// (for a leaf: before it is accumulated); may return a replacement.
void register_hook(const Tensor& t, TensorHook hook);
// Runs after a leaf's gradient has been accumulated into grad(t) (DDP and
// FSDP start communication from these).
void register_post_accumulate_grad_hook(const Tensor& t, std::function<void(const Tensor&)> hook);

// Where the gradient of t goes: its grad_fn, or the accumulator of a leaf
// that requires grad; an invalid edge otherwise.
Edge gradient_edge(const Tensor& t);
// The AccumulateGrad node of a leaf that requires grad (made on first use).
std::shared_ptr<Node> grad_accumulator(const Tensor& t);
// Makes t output `output_nr` of `fn` (used by autograd kernels).
void set_history(const Tensor& t, std::shared_ptr<Node> fn, uint32_t output_nr = 0);

}  // namespace trainrun
