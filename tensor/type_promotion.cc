#include "tensor/type_promotion.h"

#include <optional>

namespace trainrun {
namespace {

using MaybeDType = std::optional<DType>;

MaybeDType promote(MaybeDType a, DType b) { return a ? promote_types(*a, b) : b; }

// PyTorch's combine_categories: a lower-priority group only matters when it
// is of a higher category than the higher-priority group.
MaybeDType combine(MaybeDType higher, MaybeDType lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

DType result_type(const std::vector<Tensor>& operands) {
  MaybeDType dim_result, zero_dim_result, wrapped_result;
  for (const Tensor& t : operands) {
    if (!t.defined()) continue;
    if (t.impl()->is_wrapped_number()) {
      // A float number counts as the default dtype, not float64.
      DType d = is_floating(t.dtype()) ? default_float_dtype() : t.dtype();
      wrapped_result = promote(wrapped_result, d);
    } else if (t.dim() == 0) {
      zero_dim_result = promote(zero_dim_result, t.dtype());
    } else {
      dim_result = promote(dim_result, t.dtype());
    }
  }
  MaybeDType r = combine(dim_result, combine(zero_dim_result, wrapped_result));
  TR_CHECK(r.has_value(), ValueError, "result_type: no defined operands");
  return *r;
}

}  // namespace trainrun
