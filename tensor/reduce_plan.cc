#include "tensor/reduce_plan.h"

#include <algorithm>

#include "tensor/views.h"

namespace trainrun {

ReducePlan::ReducePlan(const Tensor& x, const IntList& dims, bool keepdim, const char* op) {
  const int64_t nd = x.dim();
  std::vector<bool> reduced(std::max<int64_t>(nd, 1), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, nd, op);
    TR_CHECK(!reduced[w], IndexError, "{}: dim {} appears more than once in the list of dims [{}]", op, w,
             fmt::join(dims, ", "));
    reduced[w] = true;
  }
  IntList perm;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) {
      perm.push_back(d);
      outer *= x.sizes()[d];
    }
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      perm.push_back(d);
      inner *= x.sizes()[d];
    }
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) out_shape.push_back(x.sizes()[d]);
    else if (keepdim) out_shape.push_back(1);
  }
  rows = contiguous(nd == 0 ? x : permute(x, perm));
}

DType sum_dtype(DType in, std::optional<DType> requested) {
  if (requested) return *requested;
  return is_floating(in) ? in : DType::Int64;
}

std::optional<std::vector<bool>> reduced_dims(int64_t nd, const IntList& dims) {
  std::vector<bool> reduced(static_cast<size_t>(std::max<int64_t>(nd, 0)), false);
  for (int64_t d : dims) {
    const int64_t w = d < 0 ? d + nd : d;
    if (w < 0 || w >= nd || reduced[w]) return std::nullopt;
    reduced[w] = true;
  }
  return reduced;
}

std::optional<BlockSplit> block_split(const Tensor& x, const IntList& dims, bool keepdim, bool reduce_middle,
                                      bool outer_may_be_empty) {
  const int64_t nd = x.dim();
  if (dims.empty() || !x.is_contiguous() || x.numel() == 0 ||
      (x.dtype() != DType::Float32 && x.dtype() != DType::Float64))
    return std::nullopt;
  const std::optional<std::vector<bool>> reduced = reduced_dims(nd, dims);
  if (!reduced) return std::nullopt;
  const auto in_middle = [&](int64_t d) { return (*reduced)[d] == reduce_middle; };
  int64_t k0 = 0;
  while (k0 < nd && !in_middle(k0)) ++k0;
  int64_t k1 = k0;
  while (k1 < nd && in_middle(k1)) ++k1;
  for (int64_t d = k1; d < nd; ++d)
    if (in_middle(d)) return std::nullopt;
  if (k1 == k0 || k1 == nd || (k0 == 0 && !outer_may_be_empty)) return std::nullopt;
  BlockSplit b;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n = x.sizes()[d];
    (d < k0 ? b.outer : d < k1 ? b.mid : b.inner) *= n;
    if (!(*reduced)[d]) b.out_shape.push_back(n);
    else if (keepdim) b.out_shape.push_back(1);
  }
  return b;
}

void check_nonempty(const ReducePlan& plan, const char* op) {
  TR_CHECK(plan.inner > 0 || plan.outer == 0, IndexError,
           "{}: cannot reduce over a zero-size dimension (the operation has no identity)", op);
}

}  // namespace trainrun
