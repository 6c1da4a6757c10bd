#include "autograd/view_history.h"

#include "autograd/functions/record.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/error.h"
#include "tensor/factories.h"
#include "tensor/indexing.h"
#include "tensor/ops.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

Geometry geometry_of(const Tensor& t) { return {t.sizes(), t.strides(), t.storage_offset()}; }

int64_t storage_numel(const Tensor& t) {
  return static_cast<int64_t>(t.impl()->storage()->nbytes() / element_size(t.dtype()));
}

// The storage positions of a geometry's elements, as a 1-D int64 index.
Tensor positions(const Geometry& at, int64_t numel, Device device) {
  Tensor all = arange(numel, TensorOptions(DType::Int64, device));
  return reshape(contiguous(as_strided(all, at.sizes, at.strides, at.offset)), {-1});
}

// g's values placed at a geometry's positions in a zero storage of numel elements (summed where it repeats one).
Tensor spread(const Tensor& g, const Geometry& at, int64_t numel) {
  return index_add(zeros({numel}, TensorOptions(g.dtype(), g.device())), 0, positions(at, numel, g.device()),
                   reshape(contiguous(g), {-1}));
}

// The view's history through its root: as_strided's backward onto the root.
void set_history_through_root(const Tensor& view, AutogradMeta& m) {
  const Tensor& root = m.view_base;
  const int64_t numel = storage_numel(root);
  const Geometry at_root = geometry_of(root), at_view = geometry_of(view);
  const DType root_dtype = root.dtype();
  auto node = std::make_shared<FormulaNode>("AsStridedBackward", [=](const Tensor& g, const TensorList&) {
    NoGradGuard no_grad;
    return TensorList{as_strided_backward(g, numel, at_root, at_view, root_dtype)};
  });
  node->set_next_edges({gradient_edge(root)});
  set_history(view, node);
  m.view_version = view.impl()->version();
}

}  // namespace

Tensor as_strided_backward(const Tensor& g, int64_t storage_numel, const Geometry& x, const Geometry& view,
                           DType x_dtype) {
  Tensor flat = spread(g, view, storage_numel);
  Tensor uses = spread(ones(x.sizes, TensorOptions(g.dtype(), g.device())), x, storage_numel);
  if (amax(uses).item<double>() > 1) flat = div(flat, clamp(uses, 1, std::nullopt));
  return cast_to(contiguous(as_strided(flat, x.sizes, x.strides, x.offset)), x_dtype);
}

void note_view(const Tensor& view, const Tensor& source) {
  AutogradMeta* m = autograd_meta(view);
  if (m == nullptr || !m->grad_fn || view.impl() == source.impl()) return;  // (not recorded)
  AutogradMeta* sm = autograd_meta(source);
  m->view_base = sm != nullptr && sm->view_base.defined() ? sm->view_base : source;
  m->view_version = view.impl()->version();
}

Tensor view_base(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  return m != nullptr ? m->view_base : Tensor();
}

void refresh_view_history(const Tensor& view) {
  AutogradMeta* m = autograd_meta(view);
  if (m == nullptr || !m->view_base.defined() || view.impl()->version() == m->view_version) return;
  set_history_through_root(view, *m);
}

void write_through_view(const Tensor& view, const Tensor& src, const std::function<void()>& write) {
  AutogradMeta* m = autograd_meta(view);
  TR_CHECK(m != nullptr && m->view_base.defined(), ValueError, "write_through_view: not a recorded view");
  const Tensor root = m->view_base;
  TR_CHECK(!(is_leaf(root) && requires_grad(root)), Error,
           "a view of a leaf Variable that requires grad is being used in an in-place operation; write under "
           "no_grad() (as init functions do), or clone() the tensor first");
  for (int64_t d = 0; d < view.dim(); ++d)
    TR_CHECK(view.stride(d) != 0 || view.size(d) <= 1, Error,
             "unsupported operation: more than one element of the written-to tensor refers to a single memory "
             "location. Please clone() the tensor before performing the operation.");
  refresh_view_history(view);
  const Edge root_edge = gradient_edge(root), src_edge = gradient_edge(src);
  write();

  const int64_t numel = storage_numel(root);
  const Geometry at_root = geometry_of(root), at_view = geometry_of(view);
  const DType root_dtype = root.dtype(), src_dtype = src.dtype();
  const IntList src_shape = src.sizes();
  const Device src_device = src.device();
  // The root's gradient passes on to its old history, zero at the written elements; theirs goes to src.
  auto node = std::make_shared<FormulaNode>("CopySlices", [=](const Tensor& g, const TensorList&) -> TensorList {
    NoGradGuard no_grad;
    const Tensor view_pos = positions(at_view, numel, g.device());
    Tensor flat = spread(g, at_root, numel);
    Tensor written = index_select(flat, 0, view_pos);
    flat = index_add(flat, 0, view_pos, neg(written));  // (zero there: x - x is exactly 0)
    Tensor to_src = cast_to(sum_to(reshape(written, at_view.sizes), src_shape), src_dtype);
    if (to_src.defined() && to_src.device() != src_device) to_src = to_src.to(src_device);
    return {cast_to(contiguous(as_strided(flat, at_root.sizes, at_root.strides, at_root.offset)), root_dtype),
            to_src};
  });
  node->set_next_edges({root_edge, src_edge});
  set_history(root, node);
  set_history_through_root(view, *m);
}

}  // namespace trainrun
