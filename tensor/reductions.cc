// Public reduction API; kernels in cpu/reduce_kernels.cc.
#include "tensor/reductions.h"

#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"

namespace trainrun {
namespace {
using SumSig = Tensor(const Tensor&, const IntList&, bool, std::optional<DType>);
using DimsSig = Tensor(const Tensor&, const IntList&, bool);
using MaxDimSig = std::tuple<Tensor, Tensor>(const Tensor&, int64_t, bool);
using ArgSig = Tensor(const Tensor&, std::optional<int64_t>, bool);
}  // namespace

Tensor sum(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return TR_DISPATCH("sum", SumSig, keys_of(x), x, dims, keepdim, dtype);
}
Tensor mean(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return TR_DISPATCH("mean", SumSig, keys_of(x), x, dims, keepdim, dtype);
}
Tensor prod(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return TR_DISPATCH("prod", SumSig, keys_of(x), x, dims, keepdim, dtype);
}
Tensor amax(const Tensor& x, const IntList& dims, bool keepdim) {
  return TR_DISPATCH("amax", DimsSig, keys_of(x), x, dims, keepdim);
}
Tensor amin(const Tensor& x, const IntList& dims, bool keepdim) {
  return TR_DISPATCH("amin", DimsSig, keys_of(x), x, dims, keepdim);
}
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = TR_DISPATCH("max.dim", MaxDimSig, keys_of(x), x, dim, keepdim);
  return {std::get<0>(r), std::get<1>(r)};
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = TR_DISPATCH("min.dim", MaxDimSig, keys_of(x), x, dim, keepdim);
  return {std::get<0>(r), std::get<1>(r)};
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return TR_DISPATCH("argmax", ArgSig, keys_of(x), x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return TR_DISPATCH("argmin", ArgSig, keys_of(x), x, dim, keepdim);
}
Tensor var(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  return TR_DISPATCH("var", Tensor(const Tensor&, const IntList&, int64_t, bool), keys_of(x), x, dims, correction,
                     keepdim);
}
Tensor std(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  return sqrt(var(x, dims, correction, keepdim));
}
Tensor norm(const Tensor& x, double p, const IntList& dims, bool keepdim) {
  return TR_DISPATCH("norm", Tensor(const Tensor&, double, const IntList&, bool), keys_of(x), x, p, dims, keepdim);
}
Tensor logsumexp(const Tensor& x, const IntList& dims, bool keepdim) {
  return TR_DISPATCH("logsumexp", DimsSig, keys_of(x), x, dims, keepdim);
}
Tensor all(const Tensor& x, const IntList& dims, bool keepdim) {
  return TR_DISPATCH("all", DimsSig, keys_of(x), x, dims, keepdim);
}
Tensor any(const Tensor& x, const IntList& dims, bool keepdim) {
  return TR_DISPATCH("any", DimsSig, keys_of(x), x, dims, keepdim);
}
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return TR_DISPATCH("cumsum", Tensor(const Tensor&, int64_t, std::optional<DType>), keys_of(x), x, dim, dtype);
}

}  // namespace trainrun
