#pragma once
// Row reductions on the GPU. A reducer describes the state it keeps and how
// states accumulate, combine and finish; one set of kernels runs them all:
//  - short rows (up to kWarpRowMax): one warp per row;
//  - long rows: a block per row, or, when rows are too few to fill the GPU,
//    several blocks per row writing partial states (into scratch the caller
//    allocates, see row_reduce_scratch_bytes) that a second kernel combines.
//    The split depends only on the shape and the GPU's SM count, so results
//    are reproducible run to run.
#include "tensor/cuda/kernels/elementwise_loop.cuh"
#include "tensor/cuda/kernels/reducers.h"

namespace trainrun::cuda {


template <typename S>
__device__ __forceinline__ S shuffle_down(S s, int offset) {
  // States are small PODs: shuffle them 4 bytes at a time.
  static_assert(sizeof(S) % 4 == 0, "reducer states must be a multiple of 4 bytes");
  union { S s; int w[sizeof(S) / 4]; } in{s}, out;
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(S) / 4); ++k) out.w[k] = __shfl_down_sync(0xffffffffu, in.w[k], offset);
  return out.s;
}

template <typename R, typename S>
__device__ __forceinline__ S warp_combine(const R& r, S s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) s = r.combine(s, shuffle_down(s, offset));
  return s;
}

// Combines the states of all threads of the block; thread 0 gets the result.
template <typename R, typename S>
__device__ S block_combine(const R& r, S s) {
  __shared__ alignas(16) char smem[sizeof(S) * (kReduceThreads / 32)];
  S* shared = reinterpret_cast<S*>(smem);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  s = warp_combine(r, s);
  if (lane == 0) shared[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < kReduceThreads / 32 ? shared[lane] : r.init();
    s = warp_combine(r, s);
  }
  return s;
}

template <typename R, typename T>
__global__ void __launch_bounds__(kReduceThreads) warp_per_row_kernel(R r, const T* in, int64_t outer, int64_t inner) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kReduceThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= outer) return;
  const T* x = in + row * inner;
  auto s = r.init();
  for (int64_t i = lane; i < inner; i += 32) s = r.accumulate(s, convert<opmath<T>>(x[i]), i);
  s = warp_combine(r, s);
  if (lane == 0) r.finish(s, row);
}

// Block (blockIdx.x = split, blockIdx.y = row) reduces its chunk of the row;
// with one split it finishes the row, else it stores its partial state.
template <typename R, typename T, typename S>
__global__ void __launch_bounds__(kReduceThreads)
    block_per_chunk_kernel(R r, const T* in, int64_t inner, int64_t chunk, S* partial) {
  const int64_t row = blockIdx.y;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = begin + chunk < inner ? begin + chunk : inner;
  const T* x = in + row * inner;
  auto s = r.init();
  for (int64_t i = begin + threadIdx.x; i < end; i += kReduceThreads) s = r.accumulate(s, convert<opmath<T>>(x[i]), i);
  s = block_combine(r, s);
  if (threadIdx.x == 0) {
    if (partial == nullptr) r.finish(s, row);
    else partial[row * gridDim.x + blockIdx.x] = s;
  }
}

template <typename R, typename S>
__global__ void __launch_bounds__(kReduceThreads)
    combine_partials_kernel(R r, const S* partial, int64_t outer, int splits) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kReduceThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= outer) return;
  S s = r.init();
  for (int k = lane; k < splits; k += 32) s = r.combine(s, partial[row * splits + k]);
  s = warp_combine(r, s);
  if (lane == 0) r.finish(s, row);
}

int multiprocessor_count();

// How many blocks share each row: 1 for short rows (a warp each) and for
// more rows than gridDim.y allows; else enough to give the GPU about four
// blocks per SM, at most one per kSplitChunk elements.
inline int64_t reduce_splits(int64_t outer, int64_t inner) {
  if (outer == 0 || inner <= kWarpRowMax || outer > 65535) return 1;
  const int64_t target_blocks = 4LL * multiprocessor_count();
  const int64_t wanted = (target_blocks + outer - 1) / outer;
  const int64_t by_size = (inner + kSplitChunk - 1) / kSplitChunk;
  const int64_t splits = by_size < wanted ? by_size : wanted;
  return splits < 1 ? 1 : splits;
}

// `scratch` holds the partial states of split rows: at least
// row_reduce_scratch_bytes(outer, inner) bytes of device memory.
template <typename T, typename R>
int launch_reducer(const R& r, const T* in, int64_t outer, int64_t inner, void* scratch, CUstream_st* stream) {
  using S = decltype(r.init());
  static_assert(sizeof(S) <= kMaxReduceStateBytes, "raise kMaxReduceStateBytes");
  if (outer == 0) return 0;
  constexpr int kRowsPerBlock = kReduceThreads / 32;
  const int64_t splits = reduce_splits(outer, inner);
  if (inner <= kWarpRowMax || outer > 65535) {
    // Short rows, or too many long rows for gridDim.y: one warp each.
    const int64_t blocks = (outer + kRowsPerBlock - 1) / kRowsPerBlock;
    warp_per_row_kernel<<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(r, in, outer, inner);
    return static_cast<int>(cudaGetLastError());
  }
  S* partial = splits > 1 ? static_cast<S*>(scratch) : nullptr;
  if (splits > 1 && partial == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  const int64_t chunk = (inner + splits - 1) / splits;
  dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(outer));
  block_per_chunk_kernel<<<grid, kReduceThreads, 0, stream>>>(r, in, inner, chunk, partial);
  if (splits > 1) {
    const int64_t blocks = (outer + kRowsPerBlock - 1) / kRowsPerBlock;
    combine_partials_kernel<<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(r, partial, outer,
                                                                                         static_cast<int>(splits));
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace trainrun::cuda
