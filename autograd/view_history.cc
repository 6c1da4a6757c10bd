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

// Where a tensor's elements sit, as flat positions from the root's first element (shape: the tensor's).
struct Layout {
  IntList sizes, strides;
  int64_t offset;  // relative to the root's storage offset
};

Layout layout_of(const Tensor& t, int64_t root_offset) {
  return {t.sizes(), t.strides(), t.storage_offset() - root_offset};
}

// How many flat positions the root's elements span (from its first one).
int64_t extent(const Layout& root) {
  int64_t last = 0;
  for (size_t d = 0; d < root.sizes.size(); ++d) {
    if (root.sizes[d] == 0) return 0;
    last += (root.sizes[d] - 1) * root.strides[d];
  }
  return last + 1;
}

// The flat positions of `l`'s elements, as a 1-D int64 index.
Tensor positions(const Layout& l, int64_t n, Device device) {
  Tensor all = arange(n, TensorOptions(DType::Int64, device));
  return reshape(contiguous(as_strided(all, l.sizes, l.strides, l.offset)), {-1});
}

// The view's history through the root: its gradient lands on the root's elements it covers (summed where the
// view repeats an element, as an expanded view does).
std::shared_ptr<Node> through_root(const Layout& root, const Layout& view, DType root_dtype) {
  const int64_t n = extent(root);
  return std::make_shared<FormulaNode>("AsStridedBackward", [=](const Tensor& g, const TensorList&) -> TensorList {
    NoGradGuard no_grad;
    Tensor flat = index_add(zeros({n}, TensorOptions(g.dtype(), g.device())), 0, positions(view, n, g.device()),
                            reshape(contiguous(g), {-1}));
    Tensor at_root = reshape(index_select(flat, 0, positions(root, n, g.device())), root.sizes);
    return {cast_to(at_root, root_dtype)};
  });
}

void set_history_through_root(const Tensor& view, AutogradMeta& m) {
  const Tensor& root = m.view_base;
  auto node = through_root(layout_of(root, root.storage_offset()), layout_of(view, root.storage_offset()),
                           root.dtype());
  node->set_next_edges({gradient_edge(root)});
  set_history(view, node);
  m.view_version = view.impl()->version();
}

}  // namespace

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
  TR_CHECK(!(is_leaf(root) && requires_grad(root)), ValueError,
           "a view of a leaf tensor that requires grad is used in an in-place operation; write under no_grad() "
           "(as init functions do), or clone() the tensor first");
  for (int64_t d = 0; d < view.dim(); ++d)
    TR_CHECK(view.stride(d) != 0 || view.size(d) <= 1, Error,
             "unsupported operation: more than one element of the written-to tensor refers to a single memory "
             "location. Please clone() the tensor before performing the operation.");
  refresh_view_history(view);
  const Edge root_edge = gradient_edge(root), src_edge = gradient_edge(src);
  write();

  const Layout root_layout = layout_of(root, root.storage_offset());
  const Layout view_layout = layout_of(view, root.storage_offset());
  const int64_t n = extent(root_layout);
  const DType root_dtype = root.dtype(), src_dtype = src.dtype();
  const IntList src_shape = src.sizes();
  const Device src_device = src.device();
  // The root's gradient passes on to its old history, zero at the written elements; theirs goes to src.
  auto node = std::make_shared<FormulaNode>("CopySlices", [=](const Tensor& g, const TensorList&) -> TensorList {
    NoGradGuard no_grad;
    const Tensor root_pos = positions(root_layout, n, g.device()), view_pos = positions(view_layout, n, g.device());
    Tensor flat = index_add(zeros({n}, TensorOptions(g.dtype(), g.device())), 0, root_pos,
                            reshape(contiguous(g), {-1}));
    Tensor written = index_select(flat, 0, view_pos);
    flat = index_add(flat, 0, view_pos, neg(written));
    Tensor to_src = cast_to(sum_to(reshape(written, view_layout.sizes), src_shape), src_dtype);
    if (to_src.defined() && to_src.device() != src_device) to_src = to_src.to(src_device);
    return {cast_to(reshape(index_select(flat, 0, root_pos), root_layout.sizes), root_dtype), to_src};
  });
  node->set_next_edges({root_edge, src_edge});
  set_history(root, node);
  set_history_through_root(view, *m);
}

}  // namespace trainrun
