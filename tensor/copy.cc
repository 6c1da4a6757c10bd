// copy_, fill_ and the ops built on them (contiguous, clone, to).
#include <optional>

#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/views.h"

namespace trainrun {

Tensor& copy_(Tensor& dst, const Tensor& src) {
  if (dst.numel() != 0 && src.sizes() != dst.sizes())
    TR_CHECK(broadcast_shapes(dst.sizes(), src.sizes(), "copy_") == dst.sizes(), ValueError,
             "copy_: source shape {} cannot be broadcast to destination shape {}", src.shape_str(), dst.shape_str());
  return ops::copy_::call(keys_of(dst, src), dst, src);
}

namespace {
thread_local bool t_non_blocking_copy = false;
}  // namespace

bool copy_is_non_blocking() { return t_non_blocking_copy; }

Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking) {
  const bool saved = t_non_blocking_copy;
  t_non_blocking_copy = non_blocking;
  try {
    copy_(dst, src);
  } catch (...) {
    t_non_blocking_copy = saved;
    throw;
  }
  t_non_blocking_copy = saved;
  return dst;
}

Tensor& fill_(Tensor& x, const Scalar& v) { return ops::fill_::call(keys_of(x), x, v); }

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

Tensor to(const Tensor& x, Device device, std::optional<DType> dtype, bool non_blocking, bool copy) {
  const DType dt = dtype.value_or(x.dtype());
  // "cuda" means the current GPU; a tensor already there is not copied.
  const bool same_device =
      x.device().type == device.type && (device.index < 0 || x.device().index == device.index || device.is_cpu());
  if (same_device && dt == x.dtype() && !copy) return x;
  if (same_device) return to(x, dt, true);
  Tensor out = empty(x.sizes(), TensorOptions(dt, device));
  return copy_(out, x, non_blocking);
}

}  // namespace trainrun
