// Autograd kernels of the indexing ops: index_select, gather, scatter,
// index_add, masked_select, sort and topk. A gradient goes back to where
// each value came from (and nowhere for positions that were overwritten).
#include <tuple>

#include "autograd/functions/record.h"
#include "tensor/op_schemas.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

// index_select / gather: the gradient is added back at the indices.
Tensor index_select_autograd(const Tensor& x, int64_t dim, const Tensor& index) {
  static const auto& op = ops::index_select::handle();
  IntList shape = x.sizes();
  DType xd = x.dtype();
  return record(
      "IndexSelectBackward", {x}, {index}, false, [&] { return op.call(keys_of(x, index), x, dim, index); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        return {index_add(zeros(shape, TensorOptions(g.dtype(), g.device())), dim, s[0], g).to(xd)};
      });
}
Tensor gather_autograd(const Tensor& x, int64_t dim, const Tensor& index) {
  static const auto& op = ops::gather::handle();
  IntList shape = x.sizes();
  DType xd = x.dtype();
  return record(
      "GatherBackward", {x}, {index}, false, [&] { return op.call(keys_of(x, index), x, dim, index); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        return {scatter_add(zeros(shape, TensorOptions(g.dtype(), g.device())), dim, s[0], g).to(xd)};
      });
}
OpKernel<ops::index_select> reg_index_select(DispatchKey::Autograd, &index_select_autograd);
OpKernel<ops::gather> reg_gather(DispatchKey::Autograd, &gather_autograd);

// g (shaped like the index) as the gradient of src, which may be larger than
// the index (only its leading part is read) or a broadcast 0-dim value.
Tensor to_source_shape(const Tensor& g, const IntList& src_shape) {
  if (g.sizes() == src_shape) return g;
  if (src_shape.empty()) return sum(g);
  NoGradGuard no_grad;  // (double backward through this case is not supported)
  Tensor full = zeros(src_shape, TensorOptions(g.dtype(), g.device())), part = full;
  for (int64_t d = 0; d < g.dim(); ++d) part = narrow(part, d, 0, g.size(d));
  copy_(part, detach(g));
  return full;
}

// scatter (reduce 0: assign, 1: add): the written positions of x get no
// gradient when assigned; src gets g gathered at the indices.
Tensor scatter_autograd(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, int64_t reduce) {
  static const auto& op = ops::scatter::handle();
  DType xd = x.dtype(), sd = src.dtype();
  IntList src_shape = src.sizes();
  const bool assign = reduce == 0;
  return record(
      assign ? "ScatterBackward" : "ScatterAddBackward", {x, Tensor(), src}, {index}, false,
      [&] { return op.call(keys_of(x, index, src), x, dim, index, src, reduce); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor& idx = s[0];
        Tensor gx = assign ? scatter(g, dim, idx, zeros({}, TensorOptions(g.dtype(), g.device()))) : g;
        Tensor gsrc = to_source_shape(gather(g, dim, idx), src_shape);
        return {cast_to(gx, xd), Tensor(), cast_to(gsrc, sd)};
      });
}
OpKernel<ops::scatter> reg_scatter(DispatchKey::Autograd, &scatter_autograd);

// index_add: x passes g through; src gets alpha * g at the indices.
Tensor index_add_autograd(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const Scalar& alpha) {
  static const auto& op = ops::index_add::handle();
  DType xd = x.dtype(), sd = src.dtype();
  IntList src_shape = src.sizes();
  const double a = alpha.to_double();
  return record(
      "IndexAddBackward", {x, Tensor(), src}, {index}, false,
      [&] { return op.call(keys_of(x, index, src), x, dim, index, src, alpha); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        Tensor gsrc = g.dim() == 0 ? g : index_select(g, dim, s[0]);
        if (a != 1.0) gsrc = mul(gsrc, a);
        return {cast_to(g, xd), Tensor(), cast_to(reshape(gsrc, src_shape), sd)};
      });
}
OpKernel<ops::index_add> reg_index_add(DispatchKey::Autograd, &index_add_autograd);

// masked_select: the selected values go back to the positions the
// (broadcast) mask picked, in order; x's broadcast dims are summed.
Tensor masked_select_autograd(const Tensor& x, const Tensor& mask) {
  static const auto& op = ops::masked_select::handle();
  IntList x_shape = x.sizes();
  DType xd = x.dtype();
  return record(
      "MaskedSelectBackward", {x, Tensor()}, {mask}, false, [&] { return op.call(keys_of(x, mask), x, mask); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        IntList shape = broadcast_shapes(x_shape, s[0].sizes(), "masked_select backward");
        Tensor positions = reshape(nonzero(reshape(contiguous(expand(s[0], shape)), {-1})), {-1});
        int64_t numel = 1;
        for (int64_t n : shape) numel *= n;
        Tensor full = index_add(zeros({numel}, TensorOptions(g.dtype(), g.device())), 0, positions, g);
        return {cast_to(sum_to(reshape(full, shape), x_shape), xd), Tensor()};
      });
}
OpKernel<ops::masked_select> reg_masked_select(DispatchKey::Autograd, &masked_select_autograd);

// sort/topk return (values, indices) along dim: each value's gradient goes
// back to the position its index names.
std::tuple<Tensor, Tensor> reordering_autograd(const char* node, const Tensor& x, int64_t dim,
                                               const std::function<std::tuple<Tensor, Tensor>()>& forward) {
  IntList shape = x.sizes();
  DType xd = x.dtype();
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), node);
  auto indices = std::make_shared<Tensor>();  // known once the forward ran
  Tensor values = record(
      node, {x}, {}, false,
      [&] {
        auto r = forward();
        *indices = std::get<1>(r);
        return std::get<0>(r);
      },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        if (shape.empty()) return {cast_to(g, xd)};
        return {cast_to(scatter(zeros(shape, TensorOptions(g.dtype(), g.device())), d, *indices, g), xd)};
      });
  return {values, *indices};
}
std::tuple<Tensor, Tensor> sort_autograd(const Tensor& x, int64_t dim, bool descending, bool stable) {
  static const auto& op = ops::sort::handle();
  return reordering_autograd("SortBackward", x, dim, [&] { return op.call(keys_of(x), x, dim, descending, stable); });
}
std::tuple<Tensor, Tensor> topk_autograd(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  static const auto& op = ops::topk::handle();
  return reordering_autograd("TopkBackward", x, dim, [&] { return op.call(keys_of(x), x, k, dim, largest, sorted); });
}
OpKernel<ops::sort> reg_sort(DispatchKey::Autograd, &sort_autograd);
OpKernel<ops::topk> reg_topk(DispatchKey::Autograd, &topk_autograd);

}  // namespace
}  // namespace trainrun
