#pragma once
// The indexing kernels (index_kernels.cu): plain arguments only. Indices are
// int64, already checked against their dim and made non-negative. Sizes and
// strides are in elements, outermost first.
#include <cstdint>

#include "tensor/cuda/kernels/kernel_args.h"

namespace trainrun::cuda {

struct IndexGeometry {
  int ndim = 0;
  int64_t sizes[kMaxElementwiseDims] = {};      // of the index (gather, scatter) or src (index_add)
  int64_t x_strides[kMaxElementwiseDims] = {};  // of the indexed tensor
  int64_t s_strides[kMaxElementwiseDims] = {};  // of src (scatter, index_add)
  int dim = 0;
};

// out[o, j, i] = x[o, index[j], i] for contiguous x [outer, size, inner].
int launch_index_select(int64_t element_size, const void* x, void* out, const int64_t* index, int64_t n_index,
                        int64_t outer, int64_t size, int64_t inner, CUstream_st* stream);
// out[p] = x[coords of p with index[p] along dim], p over the (contiguous) index.
int launch_gather(int64_t element_size, const void* x, void* out, const int64_t* index, int64_t numel,
                  const IndexGeometry& g, CUstream_st* stream);
// x[coords of p with index[p] along dim] = (or +=) src[coords of p].
int launch_scatter(DType dt, bool add, void* x, const void* src, const int64_t* index, int64_t numel,
                   const IndexGeometry& g, CUstream_st* stream);
// x[coords of q with index[q[dim]] along dim] += alpha * src[q], q over src.
int launch_index_add(DType dt, KernelScalar alpha, void* x, const void* src, const int64_t* index, int64_t numel,
                     const IndexGeometry& g, CUstream_st* stream);
// Compaction by a bool mask: out[positions[i] - 1] = x[i] where mask[i]
// (positions: the inclusive cumsum of mask); nonzero writes coordinates.
int launch_masked_compact(int64_t element_size, const void* x, const bool* mask, const int64_t* positions, void* out,
                          int64_t numel, CUstream_st* stream);
int launch_nonzero_coords(const bool* mask, const int64_t* positions, int64_t* out, int64_t numel, int ndim,
                          const int64_t* sizes, CUstream_st* stream);

}  // namespace trainrun::cuda
