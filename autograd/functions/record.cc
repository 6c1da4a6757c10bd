#include "autograd/functions/record.h"

#include "tensor/ops.h"

namespace trainrun {

TensorList FormulaNode::apply(TensorList&& grads) {
  TensorList saved;
  saved.reserve(saved_.size());
  std::shared_ptr<Node> self = shared_from_this();
  for (const auto& s : saved_) saved.push_back(s.unpack(self));
  Tensor g = grads.at(0);
  return formula_(g, saved);
}

bool any_requires_grad(const TensorList& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && requires_grad(t)) return true;
  return false;
}

void check_out_allowed(const char* op, const Tensor& out, const TensorList& inputs) {
  if (!out.defined() || !GradMode::is_enabled()) return;
  TR_CHECK(!any_requires_grad(inputs) && !requires_grad(out), NotImplementedError,
           "{}: the out= and in-place forms do not support autograd when an input requires grad; use the "
           "functional form, or run under NoGradGuard",
           op);
}

Tensor record(const char* name, const TensorList& inputs, const TensorList& save, bool save_result,
              const std::function<Tensor()>& forward, Formula formula) {
  Tensor result;
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    result = forward();
  }
  if (!GradMode::is_enabled() || !any_requires_grad(inputs)) return result;
  TR_CHECK(is_floating(result.dtype()), TypeError, "{}: an output of dtype {} cannot require grad", name,
           dtype_name(result.dtype()));
  auto node = std::make_shared<FormulaNode>(name, std::move(formula));
  std::vector<Edge> edges;
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  node->set_next_edges(std::move(edges));
  for (const Tensor& t : save) node->save(t, false);
  if (save_result) node->save(result, true);
  set_history(result, node);
  return result;
}

Tensor sum_to(const Tensor& g, const IntList& shape) {
  if (g.sizes() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  IntList dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
  Tensor r = sum(g, dims, /*keepdim=*/true);
  return reshape(r, shape);
}

Tensor cast_to(const Tensor& g, DType d) { return g.defined() && g.dtype() != d ? g.to(d) : g; }

Tensor rsub_one(const Tensor& x) { return add(neg(x), 1); }

}  // namespace trainrun
