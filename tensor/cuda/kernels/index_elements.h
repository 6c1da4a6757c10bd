#pragma once
// One element of each indexing kernel (index_kernels.cu): index_select,
// gather, scatter (assign and add), index_add, and the compaction behind
// masked_select and nonzero. Copies move elements as opaque words of their
// size. Host-and-device: CPU tests run them against the CPU ops.
#include "tensor/cuda/kernels/element_access.h"
#include "tensor/cuda/kernels/index_args.h"

namespace trainrun::cuda {

// The element types are opaque words of these sizes where only bytes move.
template <int kBytes> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

// out[o, j, i] = x[o, index[j], i] at p = (o * n_index + j) * inner + i.
template <typename W>
TR_HOST_DEVICE inline void index_select_element(const W* x, W* out, const int64_t* index, int64_t n_index,
                                                int64_t size, int64_t inner, int64_t p) {
  const int64_t i = p % inner, j = (p / inner) % n_index, o = p / (inner * n_index);
  out[p] = x[(o * size + index[j]) * inner + i];
}

// Offsets in the indexed tensor and in src of position p of the iteration
// shape; along g.dim the indexed tensor takes idx_value instead of p's coordinate.
TR_HOST_DEVICE inline void index_offsets(const IndexGeometry& g, int64_t p, int64_t idx_value, int64_t* x_off,
                                         int64_t* s_off) {
  int64_t xo = 0, so = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t c = p % g.sizes[d];
    p /= g.sizes[d];
    xo += (d == g.dim ? idx_value : c) * g.x_strides[d];
    so += c * g.s_strides[d];
  }
  *x_off = xo;
  *s_off = so;
}

template <typename W>
TR_HOST_DEVICE inline void gather_element(const W* x, W* out, const int64_t* index, const IndexGeometry& g,
                                          int64_t p) {
  int64_t xo, so;
  index_offsets(g, p, index[p], &xo, &so);
  out[p] = x[xo];
}

template <typename T, bool add>
TR_HOST_DEVICE inline void scatter_element(T* x, const T* src, const int64_t* index, const IndexGeometry& g,
                                           int64_t p) {
  int64_t xo, so;
  index_offsets(g, p, index[p], &xo, &so);
  if constexpr (add) atomic_add(x + xo, convert<opmath<T>>(src[so]));
  else x[xo] = src[so];
}

// x[coords of q with index[q along dim] along dim] += alpha * src[q], q over src.
template <typename T>
TR_HOST_DEVICE inline void index_add_element(T* x, const T* src, const int64_t* index, const IndexGeometry& g,
                                             opmath<T> alpha, int64_t p) {
  int64_t q = p, along = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    if (d == g.dim) along = q % g.sizes[d];
    q /= g.sizes[d];
  }
  int64_t xo, so;
  index_offsets(g, p, index[along], &xo, &so);
  atomic_add(x + xo, alpha * convert<opmath<T>>(src[so]));
}

// positions: the inclusive cumsum of mask, so a selected element's slot is positions[i] - 1.
template <typename W>
TR_HOST_DEVICE inline void masked_compact_element(const W* x, const bool* mask, const int64_t* positions, W* out,
                                                  int64_t i) {
  if (mask[i]) out[positions[i] - 1] = x[i];
}

struct Sizes {
  int64_t v[kMaxElementwiseDims];
};

// The coordinates of flat position i (sizes outermost first) when it is selected.
TR_HOST_DEVICE inline void nonzero_element(const bool* mask, const int64_t* positions, int64_t* out, int ndim,
                                           const Sizes& sizes, int64_t i) {
  if (!mask[i]) return;
  int64_t* row = out + (positions[i] - 1) * ndim;
  int64_t rem = i;
  for (int d = ndim - 1; d >= 0; --d) {
    row[d] = rem % sizes.v[d];
    rem /= sizes.v[d];
  }
}

}  // namespace trainrun::cuda
