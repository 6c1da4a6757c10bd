#include "autograd/functions/record.h"

#include <algorithm>

#include "autograd/view_history.h"
#include "tensor/ops.h"

namespace trainrun {

FormulaNode::FormulaNode(std::string name, Formula formula)
    : name_(std::move(name)), formula_([f = std::move(formula)](const TensorList& grads, const TensorList& saved) {
        return f(grads.at(0), saved);
      }) {}

FormulaNode::FormulaNode(std::string name, MultiFormula formula, uint32_t num_outputs, bool numbered)
    : name_(std::move(name)), numbered_(numbered), formula_(std::move(formula)) {
  set_num_inputs(num_outputs);
}

std::string FormulaNode::pytorch_name() const {
  const std::string suffix = "Backward";
  const bool backward = name_.size() >= suffix.size() && name_.compare(name_.size() - suffix.size(), suffix.size(),
                                                                      suffix) == 0;
  return numbered_ && backward ? name_ + "0" : name_;
}

TensorList FormulaNode::apply(TensorList&& grads) {
  TensorList saved;
  saved.reserve(saved_.size());
  std::shared_ptr<Node> self = shared_from_this();
  for (const auto& s : saved_) saved.push_back(s.unpack(self));
  return formula_(grads, saved);
}

bool any_requires_grad(const TensorList& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && requires_grad(t)) return true;
  return false;
}

void connect(FormulaNode& node, const TensorList& inputs, const TensorList& save) {
  std::vector<Edge> edges;
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  node.set_next_edges(std::move(edges));
  for (const Tensor& t : save) node.save(t, false);
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
  connect(*node, inputs, save);
  if (save_result) node->save(result, true);
  set_history(result, node);
  return result;
}

TensorList record_multi(const char* name, const TensorList& inputs, const TensorList& save,
                        const std::function<TensorList()>& forward, MultiFormula formula) {
  TensorList results;
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    results = forward();
  }
  if (!GradMode::is_enabled() || !any_requires_grad(inputs)) return results;
  auto node = std::make_shared<FormulaNode>(name, std::move(formula), static_cast<uint32_t>(results.size()));
  connect(*node, inputs, save);
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].defined() && is_floating(results[i].dtype()))
      set_history(results[i], node, static_cast<uint32_t>(i));
  return results;
}

Tensor record_out(const char* name, const Tensor& out, const TensorList& inputs, const TensorList& save,
                  bool save_result, const OutForward& forward, Formula formula) {
  const bool graph = GradMode::is_enabled() && (any_requires_grad(inputs) || (out.defined() && requires_grad(out)));
  if (!out.defined() || !graph)
    return record(
        name, inputs, save, save_result, [&] { return forward(inputs, out); }, std::move(formula));

  auto is_out = [&](const Tensor& t) { return t.defined() && t.impl() == out.impl(); };
  TR_CHECK(std::any_of(inputs.begin(), inputs.end(), is_out), NotImplementedError,
           "{}: the out= form does not support autograd when an input requires grad (nor does PyTorch's); use the "
           "functional form",
           name);
  TR_CHECK(!(is_leaf(out) && requires_grad(out)), Error,  // (RuntimeError, PyTorch's words: scripts match them)
           "a leaf Variable that requires grad is being used in an in-place operation ({}); update parameters "
           "under no_grad() (as optimizers do), or clone() the tensor first",
           name);
  const bool through_view = view_base(out).defined();  // (a recorded view: its root is rebased, view_history.h)
  // A recorded tensor (it has a history) may share its memory: its views follow it (view_history.h) and a copy
  // saved for backward is checked by version. A tensor without one that shares memory may be an alias made
  // outside autograd of another tensor, whose history would not see the write: refused.
  TR_CHECK(through_view || grad_fn(out) != nullptr || !out.impl()->shares_version(), NotImplementedError,
           "{}: in-place under autograd on a tensor that shares its memory with another tensor (a view, its base, or "
           "an output saved for backward) is not supported: the other tensor's gradient would go wrong. Use the "
           "out-of-place form, or clone() first",
           name);
  // A formula that saves `out` needs its value from before the write.
  TensorList ins = inputs, saved = save;
  if (std::any_of(save.begin(), save.end(), is_out)) {
    Tensor snapshot = clone(out);
    for (Tensor& t : ins)
      if (is_out(t)) t = snapshot;
    for (Tensor& t : saved)
      if (is_out(t)) t = snapshot;
  }
  Tensor result = record(
      name, ins, saved, save_result, [&] { return forward(ins, Tensor()); }, std::move(formula));
  TR_CHECK(result.sizes() == out.sizes(), ValueError,
           "{}: the result has shape {} but the tensor written in place has shape {}", name, result.shape_str(),
           out.shape_str());
  TR_CHECK(can_cast(result.dtype(), out.dtype()), TypeError,
           "{}: result dtype {} cannot be written in place into a tensor of dtype {}", name, dtype_name(result.dtype()),
           dtype_name(out.dtype()));
  if (result.dtype() != out.dtype()) result = result.to(out.dtype());  // recorded: the gradient casts back
  if (through_view) {
    write_through_view(out, result, [&] {
      ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
      Tensor dst = out;
      copy_(dst, result);
    });
    return out;
  }
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    Tensor dst = out;
    copy_(dst, result);
  }
  AutogradMeta* m = autograd_meta(result);
  set_history(out, m->grad_fn, m->output_nr);
  return out;
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

Tensor expand_reduced(const Tensor& g, const IntList& shape, const IntList& dims, bool keepdim) {
  Tensor r = g;
  if (!keepdim) {
    IntList wrapped;
    const int64_t nd = static_cast<int64_t>(shape.size());
    if (dims.empty())
      for (int64_t d = 0; d < nd; ++d) wrapped.push_back(d);
    else
      for (int64_t d : dims) wrapped.push_back(wrap_dim(d, nd, "reduction backward"));
    std::sort(wrapped.begin(), wrapped.end());
    for (int64_t d : wrapped) r = unsqueeze(r, d);
  }
  return expand(r, shape);
}

int64_t reduced_count(const IntList& shape, const IntList& dims) {
  int64_t n = 1;
  if (dims.empty()) {
    for (int64_t s : shape) n *= s;
  } else {
    for (int64_t d : dims) n *= shape[wrap_dim(d, static_cast<int64_t>(shape.size()), "reduction backward")];
  }
  return n;
}

Tensor cast_to(const Tensor& g, DType d) { return g.defined() && g.dtype() != d ? g.to(d) : g; }

Tensor rsub_one(const Tensor& x) { return add(neg(x), 1); }

}  // namespace trainrun
