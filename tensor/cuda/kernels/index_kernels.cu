// CUDA indexing kernels: grid-stride loops over the per-element code of
// index_elements.h. Additions use atomics, so the order in which duplicate
// indices add up is not fixed (as in PyTorch).
#include "tensor/cuda/kernels/elementwise_loop.cuh"
#include "tensor/cuda/kernels/index_elements.h"

namespace trainrun::cuda {
namespace {

template <typename F>
int by_element_size(int64_t es, F f) {
  switch (es) {
    case 1: return f(Word<1>{});
    case 2: return f(Word<2>{});
    case 4: return f(Word<4>{});
    case 8: return f(Word<8>{});
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

template <typename W>
__global__ void index_select_kernel(const W* x, W* out, const int64_t* index, int64_t n_index, int64_t size,
                                    int64_t inner, int64_t total) {
  TR_GRID_LOOP(p, total) index_select_element(x, out, index, n_index, size, inner, p);
}

template <typename W>
__global__ void gather_kernel(const W* x, W* out, const int64_t* index, int64_t numel, IndexGeometry g) {
  TR_GRID_LOOP(p, numel) gather_element(x, out, index, g, p);
}

template <typename T, bool add>
__global__ void scatter_kernel(T* x, const T* src, const int64_t* index, int64_t numel, IndexGeometry g) {
  TR_GRID_LOOP(p, numel) scatter_element<T, add>(x, src, index, g, p);
}

template <typename T>
__global__ void index_add_kernel(T* x, const T* src, const int64_t* index, int64_t numel, IndexGeometry g,
                                 opmath<T> alpha) {
  TR_GRID_LOOP(p, numel) index_add_element(x, src, index, g, alpha, p);
}

template <typename W>
__global__ void masked_compact_kernel(const W* x, const bool* mask, const int64_t* positions, W* out, int64_t numel) {
  TR_GRID_LOOP(i, numel) masked_compact_element(x, mask, positions, out, i);
}

__global__ void nonzero_kernel(const bool* mask, const int64_t* positions, int64_t* out, int64_t numel, int ndim,
                               Sizes sizes) {
  TR_GRID_LOOP(i, numel) nonzero_element(mask, positions, out, ndim, sizes, i);
}

}  // namespace

int launch_index_select(int64_t es, const void* x, void* out, const int64_t* index, int64_t n_index, int64_t outer,
                        int64_t size, int64_t inner, CUstream_st* stream) {
  const int64_t total = outer * n_index * inner;
  if (total == 0) return 0;
  return by_element_size(es, [&](auto tag) {
    using W = typename decltype(tag)::type;
    index_select_kernel<W><<<grid_blocks(total), 256, 0, stream>>>(static_cast<const W*>(x), static_cast<W*>(out),
                                                                    index, n_index, size, inner, total);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_gather(int64_t es, const void* x, void* out, const int64_t* index, int64_t numel, const IndexGeometry& g,
                  CUstream_st* stream) {
  if (numel == 0) return 0;
  return by_element_size(es, [&](auto tag) {
    using W = typename decltype(tag)::type;
    gather_kernel<W><<<grid_blocks(numel), 256, 0, stream>>>(static_cast<const W*>(x), static_cast<W*>(out), index,
                                                            numel, g);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_scatter(DType dt, bool add, void* x, const void* src, const int64_t* index, int64_t numel,
                   const IndexGeometry& g, CUstream_st* stream) {
  if (numel == 0) return 0;
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if (!add) {
      scatter_kernel<T, false><<<grid_blocks(numel), 256, 0, stream>>>(static_cast<T*>(x), static_cast<const T*>(src),
                                                                      index, numel, g);
    } else if constexpr (has_atomic_add<T>) {
      scatter_kernel<T, true><<<grid_blocks(numel), 256, 0, stream>>>(static_cast<T*>(x), static_cast<const T*>(src),
                                                                     index, numel, g);
    } else {
      return static_cast<int>(cudaErrorInvalidValue);
    }
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_index_add(DType dt, KernelScalar alpha, void* x, const void* src, const int64_t* index, int64_t numel,
                     const IndexGeometry& g, CUstream_st* stream) {
  if (numel == 0) return 0;
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (has_atomic_add<T>) {
      index_add_kernel<T><<<grid_blocks(numel), 256, 0, stream>>>(static_cast<T*>(x), static_cast<const T*>(src), index,
                                                                 numel, g, scalar_as<T>(alpha));
      return static_cast<int>(cudaGetLastError());
    } else {
      return static_cast<int>(cudaErrorInvalidValue);
    }
  });
}

int launch_masked_compact(int64_t es, const void* x, const bool* mask, const int64_t* positions, void* out,
                          int64_t numel, CUstream_st* stream) {
  if (numel == 0) return 0;
  return by_element_size(es, [&](auto tag) {
    using W = typename decltype(tag)::type;
    masked_compact_kernel<W><<<grid_blocks(numel), 256, 0, stream>>>(static_cast<const W*>(x), mask, positions,
                                                                    static_cast<W*>(out), numel);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_nonzero_coords(const bool* mask, const int64_t* positions, int64_t* out, int64_t numel, int ndim,
                          const int64_t* sizes, CUstream_st* stream) {
  if (numel == 0) return 0;
  if (ndim > kMaxElementwiseDims) return static_cast<int>(cudaErrorInvalidValue);
  Sizes s{};
  for (int d = 0; d < ndim; ++d) s.v[d] = sizes[d];
  nonzero_kernel<<<grid_blocks(numel), 256, 0, stream>>>(mask, positions, out, numel, ndim, s);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace trainrun::cuda
