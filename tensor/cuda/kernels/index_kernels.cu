// CUDA indexing kernels: index_select, gather, scatter (assign and add),
// index_add, and the compaction behind masked_select and nonzero. Copies move
// elements as opaque words of their size; additions use atomics (so the
// order of duplicate indices is not fixed, as in PyTorch).
#include "tensor/cuda/kernels/elementwise_loop.cuh"
#include "tensor/cuda/kernels/index_args.h"

namespace trainrun::cuda {
namespace {

template <int kBytes> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

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

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b > (int64_t(1) << 30) ? (int64_t(1) << 30) : (b < 1 ? 1 : b));
}

template <typename W>
__global__ void index_select_kernel(const W* x, W* out, const int64_t* index, int64_t n_index, int64_t size,
                                    int64_t inner, int64_t total) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < total;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = p % inner, j = (p / inner) % n_index, o = p / (inner * n_index);
    out[p] = x[(o * size + index[j]) * inner + i];
  }
}

// Offset in the indexed tensor and in src of position p of the iteration shape.
__device__ __forceinline__ void offsets_of(const IndexGeometry& g, int64_t p, int64_t idx_value, bool replace_dim,
                                           int64_t* x_off, int64_t* s_off) {
  int64_t xo = 0, so = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t c = p % g.sizes[d];
    p /= g.sizes[d];
    xo += (replace_dim && d == g.dim ? idx_value : c) * g.x_strides[d];
    so += c * g.s_strides[d];
  }
  *x_off = xo;
  *s_off = so;
}

template <typename W>
__global__ void gather_kernel(const W* x, W* out, const int64_t* index, int64_t numel, IndexGeometry g) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < numel;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t xo, so;
    offsets_of(g, p, index[p], true, &xo, &so);
    out[p] = x[xo];
  }
}

template <typename T>
__device__ __forceinline__ void atomic_add(T* address, opmath<T> v) {
  if constexpr (std::is_same<T, int64_t>::value) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(v));
  } else if constexpr (std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value) {
    atomicAdd(address, convert<T>(v));
  } else {
    atomicAdd(address, static_cast<T>(v));
  }
}

template <typename T>
constexpr bool has_atomic_add = std::is_same<T, float>::value || std::is_same<T, double>::value ||
                                std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value ||
                                std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;

template <typename T, bool add>
__global__ void scatter_kernel(T* x, const T* src, const int64_t* index, int64_t numel, IndexGeometry g) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < numel;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t xo, so;
    offsets_of(g, p, index[p], true, &xo, &so);
    if constexpr (add) atomic_add(x + xo, convert<opmath<T>>(src[so]));
    else x[xo] = src[so];
  }
}

template <typename T>
__global__ void index_add_kernel(T* x, const T* src, const int64_t* index, int64_t numel, IndexGeometry g,
                                 opmath<T> alpha) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < numel;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // The coordinate along dim picks the index entry.
    int64_t q = p, along = 0;
    for (int d = g.ndim - 1; d >= 0; --d) {
      if (d == g.dim) along = q % g.sizes[d];
      q /= g.sizes[d];
    }
    int64_t xo, so;
    offsets_of(g, p, index[along], true, &xo, &so);
    atomic_add(x + xo, alpha * convert<opmath<T>>(src[so]));
  }
}

template <typename W>
__global__ void masked_compact_kernel(const W* x, const bool* mask, const int64_t* positions, W* out, int64_t numel) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (mask[i]) out[positions[i] - 1] = x[i];
}

struct Sizes {
  int64_t v[kMaxElementwiseDims];
};

__global__ void nonzero_kernel(const bool* mask, const int64_t* positions, int64_t* out, int64_t numel, int ndim,
                               Sizes sizes) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!mask[i]) continue;
    int64_t* row = out + (positions[i] - 1) * ndim;
    int64_t rem = i;
    for (int d = ndim - 1; d >= 0; --d) {
      row[d] = rem % sizes.v[d];
      rem /= sizes.v[d];
    }
  }
}

}  // namespace

int launch_index_select(int64_t es, const void* x, void* out, const int64_t* index, int64_t n_index, int64_t outer,
                        int64_t size, int64_t inner, CUstream_st* stream) {
  const int64_t total = outer * n_index * inner;
  if (total == 0) return 0;
  return by_element_size(es, [&](auto tag) {
    using W = typename decltype(tag)::type;
    index_select_kernel<W><<<blocks_for(total), 256, 0, stream>>>(static_cast<const W*>(x), static_cast<W*>(out), index,
                                                                   n_index, size, inner, total);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_gather(int64_t es, const void* x, void* out, const int64_t* index, int64_t numel, const IndexGeometry& g,
                  CUstream_st* stream) {
  if (numel == 0) return 0;
  return by_element_size(es, [&](auto tag) {
    using W = typename decltype(tag)::type;
    gather_kernel<W><<<blocks_for(numel), 256, 0, stream>>>(static_cast<const W*>(x), static_cast<W*>(out), index,
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
      scatter_kernel<T, false><<<blocks_for(numel), 256, 0, stream>>>(static_cast<T*>(x), static_cast<const T*>(src),
                                                                      index, numel, g);
    } else if constexpr (has_atomic_add<T>) {
      scatter_kernel<T, true><<<blocks_for(numel), 256, 0, stream>>>(static_cast<T*>(x), static_cast<const T*>(src),
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
      index_add_kernel<T><<<blocks_for(numel), 256, 0, stream>>>(static_cast<T*>(x), static_cast<const T*>(src), index,
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
    masked_compact_kernel<W><<<blocks_for(numel), 256, 0, stream>>>(static_cast<const W*>(x), mask, positions,
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
  nonzero_kernel<<<blocks_for(numel), 256, 0, stream>>>(mask, positions, out, numel, ndim, s);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace trainrun::cuda
