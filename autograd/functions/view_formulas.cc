// Autograd kernels of the views: the gradient of a view reaches its base by
// undoing the view (reshape back, inverse permutation, sum over expanded
// dims, scatter into zeros for select/slice). copy_ (behind contiguous,
// clone and to) passes the gradient to its source.
#include "autograd/functions/record.h"
#include "autograd/view_history.h"
#include "tensor/op_schemas.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

// Views that only change the shape: the gradient is reshaped back.
Tensor shape_view(const char* node, const Tensor& x, const std::function<Tensor()>& forward) {
  IntList shape = x.sizes();
  Tensor out = record(node, {x}, {}, false, forward,
                [shape](const Tensor& g, const TensorList&) -> TensorList { return {reshape(g, shape)}; });
  note_view(out, x);  // (its root takes in-place writes through it: view_history.h)
  return out;
}

Tensor view_autograd(const Tensor& x, const IntList& sizes) {
  static const auto& op = ops::view::handle();
  return shape_view("ViewBackward", x, [&] { return op.call(keys_of(x), x, sizes); });
}
Tensor unsqueeze_autograd(const Tensor& x, int64_t dim) {
  static const auto& op = ops::unsqueeze::handle();
  return shape_view("UnsqueezeBackward", x, [&] { return op.call(keys_of(x), x, dim); });
}
Tensor squeeze_dim_autograd(const Tensor& x, int64_t dim) {
  static const auto& op = ops::squeeze_dim::handle();
  return shape_view("SqueezeBackward", x, [&] { return op.call(keys_of(x), x, dim); });
}
Tensor alias_autograd(const Tensor& x) {
  static const auto& op = ops::alias::handle();
  return shape_view("AliasBackward", x, [&] { return op.call(keys_of(x), x); });
}
OpKernel<ops::view> reg_view(DispatchKey::Autograd, &view_autograd);
OpKernel<ops::unsqueeze> reg_unsqueeze(DispatchKey::Autograd, &unsqueeze_autograd);
OpKernel<ops::squeeze_dim> reg_squeeze(DispatchKey::Autograd, &squeeze_dim_autograd);
OpKernel<ops::alias> reg_alias(DispatchKey::Autograd, &alias_autograd);

Tensor permute_autograd(const Tensor& x, const IntList& dims) {
  static const auto& op = ops::permute::handle();
  IntList inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[wrap_dim(dims[i], x.dim(), "permute")] = static_cast<int64_t>(i);
  Tensor out = record(
      "PermuteBackward", {x}, {}, false, [&] { return op.call(keys_of(x), x, dims); },
      [inverse](const Tensor& g, const TensorList&) -> TensorList { return {permute(g, inverse)}; });
  note_view(out, x);  // (its root takes in-place writes through it: view_history.h)
  return out;
}
Tensor expand_autograd(const Tensor& x, const IntList& sizes) {
  static const auto& op = ops::expand::handle();
  IntList shape = x.sizes();
  Tensor out = record(
      "ExpandBackward", {x}, {}, false, [&] { return op.call(keys_of(x), x, sizes); },
      [shape](const Tensor& g, const TensorList&) -> TensorList { return {sum_to(g, shape)}; });
  note_view(out, x);  // (its root takes in-place writes through it: view_history.h)
  return out;
}
OpKernel<ops::permute> reg_permute(DispatchKey::Autograd, &permute_autograd);
OpKernel<ops::expand> reg_expand(DispatchKey::Autograd, &expand_autograd);

// select/slice: the gradient goes into the selected part of zeros. (Built
// without a graph: double backward through these is not supported yet.)
Tensor scatter_into_zeros(const IntList& shape, DType dtype, const std::function<Tensor(Tensor&)>& part,
                          const Tensor& g) {
  NoGradGuard no_grad;
  Tensor z = zeros(shape, TensorOptions(dtype, g.device()));
  Tensor p = part(z);
  copy_(p, detach(g));
  return z;
}
Tensor select_autograd(const Tensor& x, int64_t dim, int64_t index) {
  static const auto& op = ops::select::handle();
  IntList shape = x.sizes();
  DType dt = x.dtype();
  Tensor out = record(
      "SelectBackward", {x}, {}, false, [&] { return op.call(keys_of(x), x, dim, index); },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        return {scatter_into_zeros(shape, dt, [&](Tensor& z) { return select(z, dim, index); }, g)};
      });
  note_view(out, x);  // (its root takes in-place writes through it: view_history.h)
  return out;
}
Tensor slice_autograd(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                      int64_t step) {
  static const auto& op = ops::slice::handle();
  IntList shape = x.sizes();
  DType dt = x.dtype();
  Tensor out = record(
      "SliceBackward", {x}, {}, false, [&] { return op.call(keys_of(x), x, dim, start, end, step); },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        return {scatter_into_zeros(shape, dt, [&](Tensor& z) { return slice(z, dim, start, end, step); }, g)};
      });
  note_view(out, x);  // (its root takes in-place writes through it: view_history.h)
  return out;
}
// diagonal: the gradient goes onto the same diagonal of zeros.
Tensor diagonal_autograd(const Tensor& x, int64_t offset, int64_t d1, int64_t d2) {
  static const auto& op = ops::diagonal::handle();
  IntList shape = x.sizes();
  DType dt = x.dtype();
  Tensor out = record(
      "DiagonalBackward", {x}, {}, false, [&] { return op.call(keys_of(x), x, offset, d1, d2); },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        return {scatter_into_zeros(shape, dt, [&](Tensor& z) { return diagonal(z, offset, d1, d2); }, g)};
      });
  note_view(out, x);  // (its root takes in-place writes through it: view_history.h)
  return out;
}
OpKernel<ops::diagonal> reg_diagonal(DispatchKey::Autograd, &diagonal_autograd);

// as_strided addresses x's storage directly: the gradient is accumulated
// into a zero buffer shaped like that storage (positions read more than once
// get the sum), then read back through x's own geometry. Where x overlaps
// itself (an expanded tensor, an unfold's windows), several of its elements
// share one storage position: each gets an equal part of that position's
// gradient, so the parts add back up to it in x's own backward (PyTorch's
// rule).
Tensor as_strided_autograd(const Tensor& x, const IntList& sizes, const IntList& strides,
                           std::optional<int64_t> offset) {
  static const auto& op = ops::as_strided::handle();
  const int64_t storage_numel = static_cast<int64_t>(x.impl()->storage()->nbytes() / element_size(x.dtype()));
  IntList x_sizes = x.sizes(), x_strides = x.strides();
  const int64_t x_offset = x.storage_offset(), view_offset = offset.value_or(x_offset);
  DType dt = x.dtype();
  Tensor out = record(
      "AsStridedBackward", {x}, {}, false, [&] { return op.call(keys_of(x), x, sizes, strides, offset); },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        return {as_strided_backward(g, storage_numel, {x_sizes, x_strides, x_offset}, {sizes, strides, view_offset},
                                    dt)};
      });
  note_view(out, x);  // (its root takes in-place writes through it: view_history.h)
  return out;
}
OpKernel<ops::as_strided> reg_as_strided(DispatchKey::Autograd, &as_strided_autograd);

// fill_ overwrites every value: the tensor's new history passes no gradient
// back (zeros to its old history, so that the graph stays connected).
Tensor& fill_autograd(Tensor& x, const Scalar& value) {
  static const auto& op = ops::fill_::handle();
  const bool rebase = GradMode::is_enabled() && requires_grad(x);
  if (rebase && view_base(x).defined()) {  // a recorded view: its root's history is rebased (CopySlices)
    Tensor values;
    {
      NoGradGuard no_grad;
      values = full_like(x, value);
    }
    write_through_view(x, values, [&] {
      ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
      op.call(keys_of(x), x, value);
    });
    return x;
  }
  if (rebase) {
    TR_CHECK(!is_leaf(x), Error,
             "a leaf Variable that requires grad is being used in an in-place operation (fill_); fill it under "
             "no_grad() (as init functions do), or clone() it first");
    TR_CHECK(grad_fn(x) != nullptr || !x.impl()->shares_version(), NotImplementedError,
             "fill_: in-place under autograd on a tensor that shares its memory with another tensor (a view or its "
             "base) is not supported; use full_like() instead");
  }
  Edge old_history = rebase ? gradient_edge(x) : Edge{};
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    op.call(keys_of(x), x, value);
  }
  if (rebase) {
    auto node = std::make_shared<FormulaNode>(
        "FillBackward", [](const Tensor& g, const TensorList&) { return TensorList{zeros_like(g)}; });
    node->set_next_edges({old_history});
    set_history(x, node);
  }
  return x;
}
OpKernel<ops::fill_> reg_fill(DispatchKey::Autograd, &fill_autograd);

OpKernel<ops::select> reg_select(DispatchKey::Autograd, &select_autograd);
OpKernel<ops::slice> reg_slice(DispatchKey::Autograd, &slice_autograd);

// copy_(dst, src): dst's values now come from src, so dst becomes an output
// of CopyBackward (its old history is overwritten with its values). dst must
// be the whole of its storage and share it with no other tensor: a copy into
// part of a buffer (a view) would leave the buffer without the history.
Tensor& copy_autograd(Tensor& dst, const Tensor& src) {
  static const auto& op = ops::copy_::handle();
  // An integer or bool destination (x.int(), x.long()) takes the values and no history: its dtype has no
  // gradient, as PyTorch's.
  const bool record_it =
      GradMode::is_enabled() && !is_integral(dst.dtype(), true) && (requires_grad(src) || requires_grad(dst));
  if (record_it && view_base(dst).defined()) {  // a recorded view: its root's history is rebased (CopySlices)
    write_through_view(dst, src, [&] {
      ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
      op.call(keys_of(dst, src), dst, src);
    });
    return dst;
  }
  if (record_it) {
    TR_CHECK(!(is_leaf(dst) && requires_grad(dst)), Error,
             "a leaf Variable that requires grad is being used in an in-place operation (copy_); update parameters "
             "under no_grad() (as optimizers do), or clone() the tensor first");
    const bool whole = dst.storage_offset() == 0 && dst.is_contiguous() &&
                       static_cast<size_t>(dst.numel()) * element_size(dst.dtype()) == dst.impl()->storage()->nbytes();
    // (a recorded dst may share its memory: its views follow it, a copy saved for backward is checked by version)
    TR_CHECK(whole && (grad_fn(dst) != nullptr || !dst.impl()->shares_version()), NotImplementedError,
             "copy_: copying under autograd into a view of another tensor (or a tensor that has views) is not "
             "supported yet; build the result with an op that has a formula (cat, stack, where, scatter)");
  }
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    op.call(keys_of(dst, src), dst, src);
  }
  if (record_it) {
    DType sd = src.dtype();
    IntList src_shape = src.sizes();
    Device src_device = src.device();
    // The gradient goes back to the source's dtype and device (x.cuda(): its
    // gradient returns to the CPU).
    auto node = std::make_shared<FormulaNode>("CopyBackward", [sd, src_shape, src_device](const Tensor& g,
                                                                                          const TensorList&) {
      Tensor r = cast_to(sum_to(g, src_shape), sd);
      return TensorList{r.defined() && r.device() != src_device ? r.to(src_device) : r};
    });
    node->set_next_edges({gradient_edge(src)});
    set_history(dst, node);
  }
  return dst;
}
OpKernel<ops::copy_> reg_copy(DispatchKey::Autograd, &copy_autograd);

// cat: each input gets its slice of the gradient (legacy empty 1-D inputs get none).
Tensor cat_autograd(const std::vector<Tensor>& tensors, int64_t dim) {
  static const auto& op = ops::cat::handle();
  std::vector<int64_t> lengths;
  std::vector<DType> dtypes;
  int64_t wrapped = dim;
  for (const Tensor& t : tensors) {
    const bool skipped = t.dim() == 1 && t.numel() == 0;
    if (!skipped) wrapped = wrap_dim(dim, t.dim(), "cat");
    lengths.push_back(skipped ? -1 : 0);
    dtypes.push_back(t.dtype());
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    if (lengths[i] == 0) lengths[i] = tensors[i].size(wrapped);
  return record(
      "CatBackward", tensors, {}, false,
      [&] {
        DispatchKeySet keys;
        for (const Tensor& t : tensors) keys = keys | keys_of(t);
        return op.call(keys, tensors, dim);
      },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        TensorList grads;
        int64_t offset = 0;
        for (size_t i = 0; i < lengths.size(); ++i) {
          if (lengths[i] < 0) {
            grads.push_back(Tensor());
            continue;
          }
          grads.push_back(cast_to(narrow(g, wrapped, offset, lengths[i]), dtypes[i]));
          offset += lengths[i];
        }
        return grads;
      });
}
OpKernel<ops::cat> reg_cat(DispatchKey::Autograd, &cat_autograd);

}  // namespace
}  // namespace trainrun
