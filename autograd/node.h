#pragma once
// A node of the backward graph: one differentiable op application. It maps
// the gradients of its outputs to the gradients of its inputs; next_edges
// say which node (and which of its inputs) each input gradient goes to.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {

class Node;
using TensorList = std::vector<Tensor>;

// Where a gradient goes: input `input_nr` of `node`; no node = not needed.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// A hook on a tensor's gradient: may return a replacement (defined) or
// leave it (undefined Tensor).
using TensorHook = std::function<Tensor(const Tensor&)>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::vector<Edge> next_edges = {});
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the inputs (one per next edge) from those of the outputs.
  virtual TensorList apply(TensorList&& grad_outputs) = 0;
  virtual std::string name() const = 0;
  // The name PyTorch gives this kind of node (grad_fn.name() and a tensor's repr in Python): built-in formulas
  // add the number of PyTorch's first overload ("MulBackward0"); other nodes keep their own name.
  virtual std::string pytorch_name() const { return name(); }
  // Drops saved tensors once backward no longer needs them (retain_graph=false).
  virtual void release_variables() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  void add_next_edge(Edge e) { next_edges_.push_back(std::move(e)); }
  uint32_t num_inputs() const { return num_inputs_; }
  void set_num_inputs(uint32_t n) { num_inputs_ = n; }
  // Creation order; backward runs later nodes first among the ready ones.
  uint64_t sequence_nr() const { return sequence_nr_; }

  // Hooks on the gradient arriving at output slot `output_nr` (tensor hooks).
  void add_tensor_pre_hook(uint32_t output_nr, TensorHook hook);
  // Hooks around apply: pre-hooks see (and may replace) the incoming
  // gradients; post-hooks see inputs' and outputs' gradients.
  using PreHook = std::function<TensorList(const TensorList& grad_outputs)>;
  using PostHook = std::function<void(const TensorList& grad_inputs, const TensorList& grad_outputs)>;
  void register_prehook(PreHook hook) { pre_hooks_.push_back(std::move(hook)); }
  void register_hook(PostHook hook) { post_hooks_.push_back(std::move(hook)); }

  // Runs hooks and apply, as the engine does.
  TensorList run(TensorList&& grad_outputs);

 private:
  std::vector<Edge> next_edges_;
  uint32_t num_inputs_ = 1;
  uint64_t sequence_nr_;
  std::map<uint32_t, std::vector<TensorHook>> tensor_pre_hooks_;
  std::vector<PreHook> pre_hooks_;
  std::vector<PostHook> post_hooks_;
};

}  // namespace trainrun
