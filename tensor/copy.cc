// copy_, fill_ and the ops built on them (contiguous, clone, to).
#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/views.h"

namespace trainrun {

using CopySig = Tensor&(Tensor&, const Tensor&);
using FillSig = Tensor&(Tensor&, const Scalar&);

Tensor& copy_(Tensor& dst, const Tensor& src) {
  return TR_DISPATCH("copy_", CopySig, keys_of(dst, src), dst, src);
}

Tensor& fill_(Tensor& x, const Scalar& v) { return TR_DISPATCH("fill_", FillSig, keys_of(x), x, v); }

Tensor& zero_(Tensor& x) { return fill_(x, 0); }

Tensor clone(const Tensor& x) {
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
  return copy_(out, x);
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor to(const Tensor& x, DType dtype, bool copy) {
  if (dtype == x.dtype() && !copy) return x;
  Tensor out = empty(x.sizes(), TensorOptions(dtype, x.device()));
  return copy_(out, x);
}

}  // namespace trainrun
