// Public reduction API; kernels in cpu/reduce_kernels.cc.
#include "tensor/reductions.h"

#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/op_schemas.h"

namespace trainrun {
namespace {}  // namespace

Tensor sum(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return ops::sum::call(keys_of(x), x, dims, keepdim, dtype);
}
Tensor mean(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return ops::mean::call(keys_of(x), x, dims, keepdim, dtype);
}
Tensor prod(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return ops::prod::call(keys_of(x), x, dims, keepdim, dtype);
}
Tensor amax(const Tensor& x, const IntList& dims, bool keepdim) {
  return ops::amax::call(keys_of(x), x, dims, keepdim);
}
Tensor amin(const Tensor& x, const IntList& dims, bool keepdim) {
  return ops::amin::call(keys_of(x), x, dims, keepdim);
}
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = ops::max_dim::call(keys_of(x), x, dim, keepdim);
  return {std::get<0>(r), std::get<1>(r)};
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = ops::min_dim::call(keys_of(x), x, dim, keepdim);
  return {std::get<0>(r), std::get<1>(r)};
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return ops::argmax::call(keys_of(x), x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return ops::argmin::call(keys_of(x), x, dim, keepdim);
}
Tensor var(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  return ops::var::call(keys_of(x), x, dims, correction, keepdim);
}
Tensor std(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  return sqrt(var(x, dims, correction, keepdim));
}
Tensor norm(const Tensor& x, double p, const IntList& dims, bool keepdim) {
  return ops::norm::call(keys_of(x), x, p, dims, keepdim);
}
Tensor logsumexp(const Tensor& x, const IntList& dims, bool keepdim) {
  return ops::logsumexp::call(keys_of(x), x, dims, keepdim);
}
Tensor all(const Tensor& x, const IntList& dims, bool keepdim) { return ops::all::call(keys_of(x), x, dims, keepdim); }
Tensor any(const Tensor& x, const IntList& dims, bool keepdim) { return ops::any::call(keys_of(x), x, dims, keepdim); }
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return ops::cumsum::call(keys_of(x), x, dim, dtype);
}

}  // namespace trainrun
