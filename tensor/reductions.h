#pragma once
// Reductions over any set of dims (empty dims = all dims), with keepdim.
#include <optional>
#include <utility>

#include "tensor/tensor.h"

namespace trainrun {

// Integer and bool inputs sum in int64, like PyTorch; `dtype` overrides.
Tensor sum(const Tensor& x, const IntList& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
// Largest/smallest over all elements (NaN wins, as in PyTorch).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// Values and int64 indices along one dim.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
// Index of the first max/min; no dim: index into the flattened tensor.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// correction = 1 is Bessel's (unbiased) estimate, 0 the population variance.
Tensor var(const Tensor& x, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
// p-norm; p may be inf/-inf/0.
Tensor norm(const Tensor& x, double p = 2, const IntList& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const IntList& dims, bool keepdim = false);
Tensor all(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

}  // namespace trainrun
