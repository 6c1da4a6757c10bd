#pragma once
// Runs backward: a dependency-counted traversal of the graph from the roots,
// so that each node runs once, after every gradient flowing into it has
// arrived. Among ready nodes the most recently created runs first (as in
// PyTorch). Runs on the calling thread.
#include <functional>

#include "autograd/node.h"

namespace trainrun {
namespace autograd {

// Accumulates d(roots)/d(leaf) into grad(leaf) of every leaf that requires
// grad. grad_roots may be empty for scalar roots (ones are used). Without
// retain_graph the graph's saved tensors are freed on the way; with
// create_graph the backward formulas are recorded, for double backward.
void backward(const TensorList& roots, const TensorList& grad_roots = {}, bool retain_graph = false,
              bool create_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad. An input that no
// output depends on is an error unless allow_unused (then its gradient is undefined).
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                bool retain_graph = false, bool create_graph = false, bool allow_unused = false);

// Runs fn once the current backward pass has finished (only valid inside a
// backward pass, e.g. from a hook). DDP waits for its buckets this way.
void queue_callback(std::function<void()> fn);

}  // namespace autograd

// t.backward(): autograd::backward({t}, {grad}, ...).
void backward(const Tensor& root, const Tensor& grad = Tensor(), bool retain_graph = false, bool create_graph = false);

}  // namespace trainrun
