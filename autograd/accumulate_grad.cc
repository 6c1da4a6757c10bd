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
    // A copy: the incoming tensor may also be another leaf's gradient or a
    // view into a buffer the engine reuses. Under create_graph it keeps its
    // graph instead, for double backward.
    meta->grad = GradMode::is_enabled() ? incoming : clone(detach(incoming));
  } else if (GradMode::is_enabled()) {
    meta->grad = add(meta->grad, incoming);  // out of place: keeps the graph
  } else {
    add_(meta->grad, detach(incoming));
  }
  for (const auto& hook : meta->post_accumulate_grad_hooks) hook(leaf_);
  return {};
}

}  // namespace trainrun
