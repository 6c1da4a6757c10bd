#include "autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {
namespace autograd {
namespace {

// State of one backward pass, reachable by hooks through queue_callback.
struct GraphTask {
  std::vector<std::function<void()>> callbacks;
};
thread_local GraphTask* t_current_task = nullptr;

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
// accumulated into leaves, and no AccumulateGrad node runs.
TensorList run_backward(const std::vector<Edge>& roots, const TensorList& root_grads, bool keep_graph,
                        bool create_graph, const std::vector<Edge>* capture) {
  // Count, for each node, the edges that lead into it.
  std::unordered_map<Node*, int> dependencies;
  {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (const Edge& r : roots)
      if (seen.insert(r.node.get()).second) stack.push_back(r.node.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        dependencies[e.node.get()]++;
        if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
      }
    }
  }
  std::unordered_map<Node*, TensorList> buffers;
  auto accumulate = [&](const Edge& e, const Tensor& g) {
    TensorList& buf = buffers[e.node.get()];
    if (buf.size() < std::max<uint32_t>(e.node->num_inputs(), e.input_nr + 1))
      buf.resize(std::max<uint32_t>(e.node->num_inputs(), e.input_nr + 1));
    Tensor& slot = buf[e.input_nr];
    slot = slot.defined() ? add(slot, g) : g;
  };
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  TensorList captured;
  if (capture) {
    captured.resize(capture->size());
    for (size_t i = 0; i < capture->size(); ++i)
      if ((*capture)[i].valid()) captures[(*capture)[i].node.get()].push_back({(*capture)[i].input_nr, i});
  }

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
    const bool skip = capture != nullptr && dynamic_cast<AccumulateGrad*>(node.get()) != nullptr;
    TensorList outputs;
    if (!skip) {
      bool any = false;
      for (const Tensor& g : grads) any = any || g.defined();
      if (any) {
        AutoGradMode mode(create_graph);
        try {
          outputs = node->run(std::move(grads));
        } catch (const Error&) {
          rethrow_in(*node);
        }
      }
      if (!keep_graph) node->release_variables();
    }
    const auto& edges = node->next_edges();
    if (!outputs.empty())
      TR_CHECK(outputs.size() == edges.size(), ValueError,
               "in backward of {}: the formula returned {} gradients for {} inputs", node->name(), outputs.size(),
               edges.size());
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < outputs.size() && outputs[i].defined()) accumulate(e, outputs[i]);
      if (--dependencies[e.node.get()] == 0 && queued.insert(e.node.get()).second) ready.push(e.node);
    }
  }
  // By index: a callback may queue another.
  for (size_t i = 0; i < task.callbacks.size(); ++i) {
    std::function<void()> cb = task.callbacks[i];
    cb();
  }
  return captured;
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

void queue_callback(std::function<void()> fn) {
  TR_CHECK(t_current_task != nullptr, ValueError, "queue_callback: only callable during a backward pass");
  t_current_task->callbacks.push_back(std::move(fn));
}

}  // namespace autograd

void backward(const Tensor& root, const Tensor& grad, bool retain_graph, bool create_graph) {
  autograd::backward({root}, grad.defined() ? TensorList{grad} : TensorList{}, retain_graph, create_graph);
}

}  // namespace trainrun
