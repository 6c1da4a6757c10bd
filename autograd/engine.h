#pragma once
// Runs backward: a dependency-counted traversal of the graph from the roots,
// so that each node runs once, after every gradient flowing into it has
// arrived. Among ready nodes the most recently created runs first (as in
// PyTorch). Runs on the calling thread.
#include <functional>
#include <memory>
#include <utility>

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

// A backward split in two, for zero-bubble pipeline schedules: the input
// pass (backward_inputs) computes d(outputs)/d(inputs) running only the
// nodes on a path to the inputs, and only the input gradients on such paths
// (mm's gradient for its activation, not for its weight); the graph is kept.
// run() later computes the rest (every other leaf's gradient, accumulated
// into .grad with its hooks, as backward would) by re-entering the nodes
// where the two parts diverge with the gradients they received, then frees
// the graph. Together they do the work of one backward.
class DeferredWeightGrads {
 public:
  ~DeferredWeightGrads();
  void run();
  bool done() const;
  struct State;

 private:
  DeferredWeightGrads();
  friend std::pair<TensorList, std::shared_ptr<DeferredWeightGrads>> backward_inputs(const TensorList&,
                                                                                     const TensorList&,
                                                                                     const TensorList&);
  std::unique_ptr<State> state_;
};
std::pair<TensorList, std::shared_ptr<DeferredWeightGrads>> backward_inputs(const TensorList& outputs,
                                                                            const TensorList& inputs,
                                                                            const TensorList& grad_outputs = {});

// Whether the node the engine is running must compute its input gradient
// `edge` (the one along its next edge `edge`): false when the pass needs
// nothing from that edge (grad() toward other inputs, an input pass skipping
// the weights). Formulas with costly gradients ask; the rest compute all.
bool needs_input_grad(size_t edge);

// Runs fn once the current backward pass has finished (only valid inside a
// backward pass, e.g. from a hook). DDP waits for its buckets this way.
void queue_callback(std::function<void()> fn);
// True while this thread runs a backward pass (graph capture records only
// the forward program).
bool in_backward_pass();

}  // namespace autograd

// t.backward(): autograd::backward({t}, {grad}, ...).
void backward(const Tensor& root, const Tensor& grad = Tensor(), bool retain_graph = false, bool create_graph = false);

}  // namespace trainrun
