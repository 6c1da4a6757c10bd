// Public indexing API; kernels in cpu/index_kernels.cc and cpu/sort_kernels.cc.
// cat, stack and masked_fill are composed from copy_/where.
#include "tensor/indexing.h"

#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/type_promotion.h"
#include "tensor/views.h"

namespace trainrun {
namespace {
constexpr int64_t kAssign = 0, kAdd = 1;
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return ops::index_select::call(keys_of(x, index), x, dim, index);
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return ops::gather::call(keys_of(x, index), x, dim, index);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return ops::scatter::call(keys_of(x, index, src), x, dim, index, src, kAssign);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter(x, dim, index, scalar_tensor(value, x.dtype()));
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return ops::scatter::call(keys_of(x, index, src), x, dim, index, src, kAdd);
}
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return copy_(x, scatter_add(x, dim, index, src));
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const Scalar& alpha) {
  return ops::index_add::call(keys_of(x, index, src), x, dim, index, src, alpha);
}
Tensor& index_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const Scalar& alpha) {
  return copy_(x, index_add(x, dim, index, src, alpha));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  TR_CHECK(mask.dtype() == DType::Bool, TypeError, "masked_fill: mask must be bool, got {}", dtype_name(mask.dtype()));
  Tensor r = where(mask, scalar_tensor(value, x.dtype()), x);
  TR_CHECK(r.sizes() == x.sizes(), ValueError, "masked_fill: mask of shape {} does not broadcast to input shape {}",
           mask.shape_str(), x.shape_str());
  return r;
}
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value) { return copy_(x, masked_fill(x, mask, value)); }

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  return ops::masked_select::call(keys_of(x, mask), x, mask);
}
Tensor nonzero(const Tensor& x) { return ops::nonzero::call(keys_of(x), x); }

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return ops::topk::call(keys_of(x), x, k, dim, largest, sorted);
}
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return ops::sort::call(keys_of(x), x, dim, descending, stable);
}

namespace {

Tensor cat_kernel(const std::vector<Tensor>& tensors, int64_t dim) {
  // Like PyTorch, 1-D empty tensors are skipped (legacy behaviour).
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors)
    if (!(t.dim() == 1 && t.numel() == 0)) parts.push_back(t);
  if (parts.empty()) return empty({0}, TensorOptions(result_type(tensors), tensors[0].device()));
  const Tensor& ref = parts[0];
  TR_CHECK(ref.dim() > 0, ValueError, "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  dim = wrap_dim(dim, ref.dim(), "cat");
  IntList shape = ref.sizes();
  shape[dim] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = parts[i];
    TR_CHECK(t.dim() == ref.dim(), ValueError, "cat: tensor {} has {} dims but tensor 0 has {}", i, t.dim(), ref.dim());
    for (int64_t d = 0; d < ref.dim(); ++d)
      TR_CHECK(d == dim || t.size(d) == ref.size(d), ValueError,
               "cat: sizes must match except in dim {}; tensor {} has shape {} but tensor 0 has {}", dim, i,
               t.shape_str(), ref.shape_str());
    shape[dim] += t.size(dim);
  }
  Tensor out = empty(shape, TensorOptions(result_type(parts), ref.device()));
  int64_t offset = 0;
  for (const Tensor& t : parts) {
    Tensor slot = narrow(out, dim, offset, t.size(dim));
    copy_(slot, t);
    offset += t.size(dim);
  }
  return out;
}

// Device-generic: it only allocates and copies.
OpKernel<ops::cat> reg_cat(&cat_kernel);

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  TR_CHECK(!tensors.empty(), ValueError, "cat: expected a non-empty list of tensors");
  DispatchKeySet keys;
  for (const Tensor& t : tensors) keys = keys | keys_of(t);
  return ops::cat::call(keys, tensors, dim);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  TR_CHECK(!tensors.empty(), ValueError, "stack: expected a non-empty list of tensors");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TR_CHECK(tensors[i].sizes() == tensors[0].sizes(), ValueError,
             "stack: expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
             tensors[0].shape_str(), tensors[i].shape_str(), i);
    parts.push_back(unsqueeze(tensors[i], dim));
  }
  return cat(parts, dim);
}

}  // namespace trainrun
