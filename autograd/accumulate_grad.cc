#include "autograd/accumulate_grad.h"

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {

AccumulateGrad::AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) { set_num_inputs(1); }

TensorList AccumulateGrad::apply(TensorList&& grads) {
  const Tensor& g = grads.at(0);
  if (!g.defined()) return {};
  TR_CHECK(g.sizes() == leaf_.sizes(), ValueError,
           "AccumulateGrad: the gradient of shape {} does not match the leaf's shape {}", g.shape_str(),
           leaf_.shape_str());
  AutogradMeta* meta = autograd_meta(leaf_);
  Tensor incoming = g.dtype() == leaf_.dtype() ? g : g.to(leaf_.dtype());
  if (!meta->grad.defined()) {
    // Under create_graph the gradient keeps its graph, for double backward.
    // Otherwise it is stolen when nothing else can see it (this node holds
    // the only handle and it owns its storage alone: e.g. the fresh result
    // of mm in Linear's backward), and copied when it is shared (the same
    // tensor can reach two leaves, or be a view of a buffer).
    if (GradMode::is_enabled()) {
      meta->grad = incoming;
    } else {
      grads[0] = Tensor();  // drop the engine's handle, so ours may be the last
      const bool sole = incoming.impl()->use_count() == 1 && incoming.impl()->storage()->use_count() == 1 &&
                        incoming.is_contiguous() && !requires_grad(incoming);
      meta->grad = sole ? incoming : clone(detach(incoming));
    }
  } else if (GradMode::is_enabled()) {
    meta->grad = add(meta->grad, incoming);  // out of place: keeps the graph
  } else {
    add_(meta->grad, detach(incoming));
  }
  for (const auto& hook : meta->post_accumulate_grad_hooks) hook(leaf_);
  return {};
}

}  // namespace trainrun
