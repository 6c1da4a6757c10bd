#pragma once
// Checked host-side shapes in the plain form the CUDA kernels take: conv and
// pool geometry (from tensor/nn_shapes.h) and the indexing ops' iteration
// shape and strides.
#include "tensor/cuda/kernels/index_args.h"
#include "tensor/cuda/kernels/sort_conv_args.h"
#include "tensor/nn_shapes.h"

namespace trainrun::cuda {

inline ConvGeometry conv_geometry(const ConvArgs& a) {
  return {a.N, a.C, a.H, a.W, a.kH, a.kW, a.Ho, a.Wo, a.st[0], a.st[1], a.pad[0], a.pad[1], a.dil[0], a.dil[1]};
}

inline PoolArgs pool_args(const PoolGeometry& g, bool count_include_pad) {
  return {g.planes, g.H, g.W, g.Ho, g.Wo, g.kH, g.kW, g.sH, g.sW, g.pH, g.pW, g.dH, g.dW, count_include_pad};
}

// Iteration over shape_of's elements, reading x (and src, when given) through
// their own strides; dim is the indexed dim.
inline IndexGeometry index_geometry(const Tensor& shape_of, const Tensor& x, const Tensor* src, int64_t dim) {
  TR_CHECK(shape_of.dim() <= kMaxElementwiseDims, NotImplementedError,
           "CUDA indexing handles at most {} dims, got {}", kMaxElementwiseDims, shape_of.dim());
  IndexGeometry g;
  g.ndim = static_cast<int>(shape_of.dim());
  g.dim = static_cast<int>(dim);
  for (int d = 0; d < g.ndim; ++d) {
    g.sizes[d] = shape_of.size(d);
    g.x_strides[d] = x.dim() == 0 ? 0 : x.stride(d);
    g.s_strides[d] = src != nullptr && src->dim() > 0 ? src->stride(d) : 0;
  }
  return g;
}

}  // namespace trainrun::cuda
