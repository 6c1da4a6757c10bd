#include "autograd/variable.h"

#include "autograd/accumulate_grad.h"
#include "autograd/grad_mode.h"
#include "autograd/view_history.h"
#include "tensor/dispatcher.h"
#include "tensor/graph_break.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

AutogradMeta& materialize(const Tensor& t) {
  TR_CHECK(t.defined(), ValueError, "autograd: undefined tensor");
  if (auto* m = autograd_meta(t)) return *m;
  auto meta = std::make_unique<AutogradMeta>();
  AutogradMeta* raw = meta.get();
  t.impl()->set_autograd_meta(std::move(meta));
  return *raw;
}

}  // namespace

AutogradMeta* autograd_meta(const Tensor& t) {
  if (!t.defined()) return nullptr;
  return static_cast<AutogradMeta*>(t.impl()->autograd_meta());
}

Tensor& set_requires_grad(Tensor& t, bool requires) {
  TR_CHECK(!requires || is_floating(t.dtype()), Error,  // (RuntimeError in Python, as PyTorch's)
           "only Tensors of floating point dtype can require gradients (this one is {})", dtype_name(t.dtype()));
  AutogradMeta& m = materialize(t);
  TR_CHECK(m.grad_fn == nullptr || requires, Error,
           "you can only change requires_grad flags of leaf variables (this one was made by {}); to use a computed "
           "tensor in a subgraph that doesn't require differentiation, use var.detach()",
           m.grad_fn ? m.grad_fn->name() : "");
  m.requires_grad = requires;
  if (requires)
    t.impl()->add_key(DispatchKey::Autograd);
  else
    t.impl()->remove_key(DispatchKey::Autograd);
  return t;
}

bool requires_grad(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  return m != nullptr && (m->requires_grad || m->grad_fn != nullptr);
}

bool is_leaf(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  return m == nullptr || m->grad_fn == nullptr;
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  return m ? m->grad_fn : nullptr;
}

Tensor grad(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  if (m == nullptr) return Tensor();
  return m->retained_grad ? *m->retained_grad : m->grad;
}

void set_grad(const Tensor& t, const Tensor& g) {
  if (g.defined())
    TR_CHECK(g.sizes() == t.sizes(), ValueError, "set_grad: gradient of shape {} for a tensor of shape {}",
             g.shape_str(), t.shape_str());
  materialize(t).grad = g;
}

void zero_grad(const std::vector<Tensor>& tensors, bool set_to_none) {
  for (const Tensor& t : tensors) {
    Tensor g = grad(t);
    if (!g.defined()) continue;
    if (set_to_none) {
      set_grad(t, Tensor());
    } else {
      NoGradGuard no_grad;
      zero_(g);
    }
  }
}

Tensor detach(const Tensor& t) {
  if (!t.defined()) return t;
  ExcludeDispatchKeyGuard guard(DispatchKey::Autograd);
  return alias(t);  // a new impl over the same storage and version counter, with no autograd metadata
}

void retain_grad(const Tensor& t) {
  TR_CHECK(requires_grad(t), ValueError, "retain_grad: the tensor does not require grad");
  AutogradMeta& m = materialize(t);
  if (m.grad_fn == nullptr || m.retained_grad) return;  // leaves keep their grad anyway
  // The hook lives in grad_fn, which may outlive t: it writes into a box
  // that t's metadata shares, never into t itself.
  m.retained_grad = std::make_shared<Tensor>();
  std::shared_ptr<Tensor> box = m.retained_grad;
  m.grad_fn->add_tensor_pre_hook(m.output_nr, [box](const Tensor& g) {
    Tensor copy = clone(detach(g));
    *box = box->defined() ? add(*box, copy) : copy;
    return Tensor();
  });
}

void register_hook(const Tensor& t, TensorHook hook) {
  TR_CHECK(requires_grad(t), ValueError,
           "register_hook: cannot register a hook on a tensor that does not require grad");
  AutogradMeta& m = materialize(t);
  if (m.grad_fn) {
    // A replay would not register it again (and a recorded backward would replay what it did once).
    note_graph_break("a hook was registered on a tensor's gradient (register_hook) during the call");
    m.grad_fn->add_tensor_pre_hook(m.output_nr, std::move(hook));
    return;
  }
  m.leaf_hooks.push_back(hook);
  if (auto live = m.grad_accumulator.lock()) live->add_tensor_pre_hook(0, std::move(hook));
}

void register_post_accumulate_grad_hook(const Tensor& t, std::function<void(const Tensor&)> hook) {
  TR_CHECK(is_leaf(t) && requires_grad(t), ValueError,
           "register_post_accumulate_grad_hook: only leaf tensors that require grad have an accumulated gradient");
  materialize(t).post_accumulate_grad_hooks.push_back(std::move(hook));
}

std::shared_ptr<Node> grad_accumulator(const Tensor& t) {
  AutogradMeta& m = materialize(t);
  TR_CHECK(m.grad_fn == nullptr && m.requires_grad, ValueError,
           "grad_accumulator: only leaf tensors that require grad have one");
  if (auto existing = m.grad_accumulator.lock()) return existing;
  // The node holds the leaf; the leaf holds the node weakly (no cycle). A
  // detached alias would lose .grad, so the node keeps the tensor itself.
  auto acc = std::make_shared<AccumulateGrad>(t);
  for (const auto& hook : m.leaf_hooks) acc->add_tensor_pre_hook(0, hook);
  m.grad_accumulator = acc;
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  if (m == nullptr) return {};
  if (m->view_base.defined()) refresh_view_history(t);  // (a view whose root was written in place since)
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (m->requires_grad) return {grad_accumulator(t), 0};
  return {};
}

void set_history(const Tensor& t, std::shared_ptr<Node> fn, uint32_t output_nr) {
  AutogradMeta& m = materialize(t);
  m.grad_fn = std::move(fn);
  m.output_nr = output_nr;
  m.requires_grad = false;  // requires grad through grad_fn
  t.impl()->add_key(DispatchKey::Autograd);
}

}  // namespace trainrun
