#include "autograd/engine.h"

#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"
#include "tensor/record_function.h"

namespace trainrun {
namespace autograd {

// Where a backward split in two (backward_inputs) left the weight gradients:
// the nodes that ran for the inputs but have other edges still to feed (their
// incoming gradients, and which edges), and the roots nothing input-related
// needed (their gradients).
struct DeferredWeightGrads::State {
  struct Seed {
    std::shared_ptr<Node> node;
    TensorList grads;
    std::vector<bool> edges;  // the edges the weight pass computes
  };
  std::vector<Seed> frontier;
  std::vector<std::pair<std::shared_ptr<Node>, TensorList>> idle_roots;
  std::vector<std::shared_ptr<Node>> ran;  // released after the weight pass
  bool done = false;
};
using Deferred = DeferredWeightGrads::State;

namespace {

// State of one backward pass, reachable by hooks through queue_callback.
struct GraphTask {
  std::vector<std::function<void()>> callbacks;
};
thread_local GraphTask* t_current_task = nullptr;
[[noreturn]] void rethrow_in(const Node& node);
// Which next edges of the node being run the pass needs (null: all of them).
thread_local const std::vector<bool>* t_needed_edges = nullptr;

// Runs node with `grads`, telling its formula which input gradients the pass needs.
TensorList run_node(Node& node, TensorList&& grads, const std::vector<bool>* needed, bool create_graph) {
  bool any = false;
  for (const Tensor& g : grads) any = any || g.defined();
  if (!any) return {};
  AutoGradMode mode(create_graph);
  const std::vector<bool>* outer = t_needed_edges;
  t_needed_edges = needed;
  struct Restore {
    const std::vector<bool>* outer;
    ~Restore() { t_needed_edges = outer; }
  } restore{outer};
  std::optional<profiling::Range> evaluate, apply;  // (PyTorch's two events for a node's backward)
  if (profiling::active()) {
    evaluate.emplace("autograd::engine::evaluate_function: " + node.name());
    apply.emplace(node.name());
  }
  try {
    return node.run(std::move(grads));
  } catch (const Error&) {
    rethrow_in(node);
  }
}

void run_callbacks(GraphTask& task) {
  for (size_t i = 0; i < task.callbacks.size(); ++i) {  // by index: a callback may queue another
    std::function<void()> cb = task.callbacks[i];
    cb();
  }
}

struct LaterFirst {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

// Rethrows the current exception with the node's name in front, keeping its type.
[[noreturn]] void rethrow_in(const Node& node) {
  const std::string where = "in backward of " + node.name() + ": ";
  try {
    throw;
  } catch (const ValueError& e) {
    throw ValueError(where + e.what());
  } catch (const TypeError& e) {
    throw TypeError(where + e.what());
  } catch (const IndexError& e) {
    throw IndexError(where + e.what());
  } catch (const NotImplementedError& e) {
    throw NotImplementedError(where + e.what());
  } catch (const TimeoutError& e) {
    throw TimeoutError(where + e.what());
  } catch (const DistBackendError& e) {
    throw DistBackendError(where + e.what());
  } catch (const Error& e) {
    throw Error(where + e.what());
  }
}

// Runs the graph behind `roots`. When `capture` is given (autograd::grad),
// the gradients arriving at those edges are returned instead of being
// accumulated into leaves, and only the nodes on a path to them run, each
// computing only the input gradients on such a path (needs_input_grad).
// With `defer` (backward_inputs), what those nodes skip is recorded there
// for the weight pass instead.
TensorList run_backward(const std::vector<Edge>& roots, const TensorList& root_grads, bool keep_graph,
                        bool create_graph, const std::vector<Edge>* capture, Deferred* defer = nullptr) {
  // The graph reachable from the roots.
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  for (const Edge& r : roots)
    if (seen.insert(r.node.get()).second) order.push_back(r.node.get());
  for (size_t k = 0; k < order.size(); ++k)
    for (const Edge& e : order[k]->next_edges())
      if (e.valid() && seen.insert(e.node.get()).second) order.push_back(e.node.get());

  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  TensorList captured;
  if (capture) {
    captured.resize(capture->size());
    for (size_t i = 0; i < capture->size(); ++i)
      if ((*capture)[i].valid()) captures[(*capture)[i].node.get()].push_back({(*capture)[i].input_nr, i});
  }
  // With targets, a node runs only when a target is downstream of it: found by walking the graph upstream.
  std::unordered_set<Node*> needed;
  if (capture) {
    std::unordered_map<Node*, std::vector<Node*>> upstream;
    for (Node* n : order)
      for (const Edge& e : n->next_edges())
        if (e.valid()) upstream[e.node.get()].push_back(n);
    std::vector<Node*> stack;
    for (auto& [target, _] : captures) stack.push_back(target);
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (Node* up : upstream[n])
        if (needed.insert(up).second) stack.push_back(up);
    }
  }
  auto runs = [&](Node* n) { return capture == nullptr || needed.count(n) > 0; };
  auto wanted = [&](Node* n) { return runs(n) || captures.count(n) > 0; };

  // For each node, the edges from running nodes that lead into it.
  std::unordered_map<Node*, int> dependencies;
  for (Node* n : order)
    if (runs(n))
      for (const Edge& e : n->next_edges())
        if (e.valid()) dependencies[e.node.get()]++;
  std::unordered_map<Node*, TensorList> buffers;
  auto accumulate = [&](const Edge& e, const Tensor& g) {
    TensorList& buf = buffers[e.node.get()];
    if (buf.size() < std::max<uint32_t>(e.node->num_inputs(), e.input_nr + 1))
      buf.resize(std::max<uint32_t>(e.node->num_inputs(), e.input_nr + 1));
    Tensor& slot = buf[e.input_nr];
    slot = slot.defined() ? add(slot, g) : g;
  };

  GraphTask task;
  GraphTask* outer = t_current_task;
  t_current_task = &task;
  struct Restore {
    GraphTask* outer;
    ~Restore() { t_current_task = outer; }
  } restore{outer};

  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, LaterFirst> ready;
  std::unordered_set<Node*> queued;
  for (size_t i = 0; i < roots.size(); ++i) accumulate(roots[i], root_grads[i]);
  for (const Edge& r : roots)
    if (dependencies[r.node.get()] == 0 && queued.insert(r.node.get()).second) ready.push(r.node);

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    TensorList grads = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    grads.resize(std::max<size_t>(grads.size(), node->num_inputs()));
    auto cap = captures.find(node.get());
    if (cap != captures.end())
      for (auto [input_nr, index] : cap->second) captured[index] = input_nr < grads.size() ? grads[input_nr] : Tensor();
    const auto& edges = node->next_edges();
    if (!runs(node.get())) {  // a target, or a root only the weight pass needs
      if (defer != nullptr && cap == captures.end()) defer->idle_roots.emplace_back(node, std::move(grads));
      continue;
    }
    std::vector<bool> mask;
    bool partial = false;
    if (capture) {
      mask.resize(edges.size());
      for (size_t i = 0; i < edges.size(); ++i) {
        mask[i] = edges[i].valid() && wanted(edges[i].node.get());
        partial = partial || (edges[i].valid() && !mask[i]);
      }
    }
    if (defer != nullptr) {
      defer->ran.push_back(node);
      if (partial) {
        std::vector<bool> rest(edges.size());
        for (size_t i = 0; i < edges.size(); ++i) rest[i] = edges[i].valid() && !mask[i];
        defer->frontier.push_back({node, grads, std::move(rest)});
      }
    }
    TensorList outputs;
    if (!(capture != nullptr && dynamic_cast<AccumulateGrad*>(node.get()) != nullptr)) {
      outputs = run_node(*node, std::move(grads), capture ? &mask : nullptr, create_graph);
      if (!keep_graph) node->release_variables();
    }
    if (!outputs.empty())
      TR_CHECK(outputs.size() == edges.size(), ValueError,
               "in backward of {}: the formula returned {} gradients for {} inputs", node->name(), outputs.size(),
               edges.size());
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid() || (capture && !mask[i])) continue;
      if (i < outputs.size() && outputs[i].defined()) accumulate(e, outputs[i]);
      if (--dependencies[e.node.get()] == 0 && wanted(e.node.get()) && queued.insert(e.node.get()).second)
        ready.push(e.node);
    }
  }
  run_callbacks(task);
  return captured;
}

// The weight pass of a split backward: the frontier nodes compute the edges
// the input pass skipped, then everything downstream of those (and of the
// idle roots) runs as a backward does, accumulating into the leaves.
void run_deferred(Deferred& d, bool keep_graph) {
  // The nodes this pass runs: downstream of the frontier's deferred edges and of the idle roots.
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> members;
  std::vector<Node*> order;
  auto visit = [&](Node* n) {
    if (members.insert(n).second) order.push_back(n);
  };
  for (auto& seed : d.frontier)
    for (size_t i = 0; i < seed.edges.size(); ++i)
      if (seed.edges[i]) {
        dependencies[seed.node->next_edges()[i].node.get()]++;
        visit(seed.node->next_edges()[i].node.get());
      }
  for (auto& [root, _] : d.idle_roots) visit(root.get());
  for (size_t k = 0; k < order.size(); ++k)
    for (const Edge& e : order[k]->next_edges())
      if (e.valid()) {
        dependencies[e.node.get()]++;
        visit(e.node.get());
      }
  std::unordered_map<Node*, TensorList> buffers;
  auto accumulate = [&](const Edge& e, const Tensor& g) {
    TensorList& buf = buffers[e.node.get()];
    if (buf.size() < std::max<uint32_t>(e.node->num_inputs(), e.input_nr + 1))
      buf.resize(std::max<uint32_t>(e.node->num_inputs(), e.input_nr + 1));
    Tensor& slot = buf[e.input_nr];
    slot = slot.defined() ? add(slot, g) : g;
  };
  GraphTask task;
  GraphTask* outer = t_current_task;
  t_current_task = &task;
  struct Restore {
    GraphTask* outer;
    ~Restore() { t_current_task = outer; }
  } restore{outer};
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, LaterFirst> ready;
  auto deliver = [&](Node& from, const TensorList& outputs, const std::vector<bool>* only) {
    const auto& edges = from.next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid() || (only != nullptr && !(*only)[i])) continue;
      if (i < outputs.size() && outputs[i].defined()) accumulate(e, outputs[i]);
      if (--dependencies[e.node.get()] == 0) ready.push(e.node);
    }
  };
  for (auto& [root, grads] : d.idle_roots) {
    TensorList& buf = buffers[root.get()];
    buf.resize(std::max(buf.size(), grads.size()));
    for (size_t i = 0; i < grads.size(); ++i)
      if (grads[i].defined()) buf[i] = buf[i].defined() ? add(buf[i], grads[i]) : grads[i];
    if (dependencies[root.get()] == 0) ready.push(root);
  }
  for (auto& seed : d.frontier) {
    TensorList outputs = run_node(*seed.node, std::move(seed.grads), &seed.edges, false);
    deliver(*seed.node, outputs, &seed.edges);
  }
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    TensorList grads = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    grads.resize(std::max<size_t>(grads.size(), node->num_inputs()));
    TensorList outputs = run_node(*node, std::move(grads), nullptr, false);
    if (!keep_graph) node->release_variables();
    deliver(*node, outputs, nullptr);
  }
  run_callbacks(task);
  if (!keep_graph)
    for (auto& n : d.ran) n->release_variables();
  d.frontier.clear();
  d.idle_roots.clear();
  d.ran.clear();
}

// Validates roots and makes their gradients (ones for scalars).
std::pair<std::vector<Edge>, TensorList> prepare_roots(const TensorList& roots, const TensorList& grad_roots,
                                                        const char* op) {
  TR_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), ValueError,
           "{}: got {} tensors but {} gradients", op, roots.size(), grad_roots.size());
  std::vector<Edge> edges;
  TensorList grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    Edge e = gradient_edge(r);
    TR_CHECK(e.valid(), ValueError, "{}: element {} of the tensors does not require grad and has no grad_fn", op, i);
    Tensor g = grad_roots.empty() ? Tensor() : grad_roots[i];
    if (!g.defined()) {
      TR_CHECK(r.numel() == 1, ValueError,
               "{}: a gradient can be created implicitly only for scalar outputs; element {} has shape {}", op, i,
               r.shape_str());
      g = ones_like(r);
    } else {
      TR_CHECK(g.sizes() == r.sizes(), ValueError, "{}: gradient {} has shape {} but its tensor has shape {}", op, i,
               g.shape_str(), r.shape_str());
    }
    edges.push_back(e);
    grads.push_back(g);
  }
  return {edges, grads};
}

}  // namespace

void backward(const TensorList& roots, const TensorList& grad_roots, bool retain_graph, bool create_graph) {
  auto [edges, grads] = prepare_roots(roots, grad_roots, "backward");
  run_backward(edges, grads, retain_graph || create_graph, create_graph, nullptr);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                bool retain_graph, bool create_graph, bool allow_unused) {
  auto [edges, grads] = prepare_roots(outputs, grad_outputs, "grad");
  std::vector<Edge> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    TR_CHECK(e.valid(), ValueError, "grad: input {} does not require grad", i);
    targets.push_back(e);
  }
  TensorList result = run_backward(edges, grads, retain_graph || create_graph, create_graph, &targets);
  for (size_t i = 0; i < result.size(); ++i)
    TR_CHECK(result[i].defined() || allow_unused, ValueError,
             "grad: input {} (shape {}) was not used to compute the outputs; pass allow_unused=true", i,
             inputs[i].shape_str());
  return result;
}

std::pair<TensorList, std::shared_ptr<DeferredWeightGrads>> backward_inputs(const TensorList& outputs,
                                                                            const TensorList& inputs,
                                                                            const TensorList& grad_outputs) {
  auto [edges, grads] = prepare_roots(outputs, grad_outputs, "backward_inputs");
  std::vector<Edge> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    TR_CHECK(e.valid(), ValueError, "backward_inputs: input {} does not require grad", i);
    targets.push_back(e);
  }
  auto deferred = std::shared_ptr<DeferredWeightGrads>(new DeferredWeightGrads());
  deferred->state_ = std::make_unique<Deferred>();
  TensorList result = run_backward(edges, grads, true, false, &targets, deferred->state_.get());
  return {result, deferred};
}

DeferredWeightGrads::DeferredWeightGrads() = default;
DeferredWeightGrads::~DeferredWeightGrads() = default;

void DeferredWeightGrads::run() {
  TR_CHECK(!state_->done, ValueError, "backward_weights: this backward's weight gradients were already computed");
  state_->done = true;
  run_deferred(*state_, false);
}

bool DeferredWeightGrads::done() const { return state_->done; }

bool needs_input_grad(size_t edge) {
  return t_needed_edges == nullptr || edge >= t_needed_edges->size() || (*t_needed_edges)[edge];
}

bool in_backward_pass() { return t_current_task != nullptr; }

void queue_callback(std::function<void()> fn) {
  TR_CHECK(t_current_task != nullptr, ValueError, "queue_callback: only callable during a backward pass");
  t_current_task->callbacks.push_back(std::move(fn));
}

}  // namespace autograd

void backward(const Tensor& root, const Tensor& grad, bool retain_graph, bool create_graph) {
  autograd::backward({root}, grad.defined() ? TensorList{grad} : TensorList{}, retain_graph, create_graph);
}

}  // namespace trainrun
