#pragma once
// Gathering, scattering, masking, sorting and joining.
#include <tuple>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j] = x[index[i][j]][j] for dim 0 (and likewise for other dims).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Copy of x with src scattered to x[index] along dim.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// x with alpha * src[i] added to row index[i] along dim.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                 const Scalar& alpha = 1);
Tensor& index_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const Scalar& alpha = 1);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value);
// 1-D tensor of the elements where mask (broadcast) is true.
Tensor masked_select(const Tensor& x, const Tensor& mask);
// (n, ndim) int64 indices of the non-zero elements, in row-major order.
Tensor nonzero(const Tensor& x);
// (values, int64 indices) of the k largest (or smallest) along dim.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
// (values, indices); stable keeps equal elements in input order. NaN sorts
// as the largest value, as in PyTorch.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                bool stable = false);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

}  // namespace trainrun
