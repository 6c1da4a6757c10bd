#pragma once
// Row reductions on the GPU. A reducer describes the state it keeps and how
// states accumulate, combine and finish; one set of kernels runs them all:
//  - short rows (up to kWarpRowMax): one warp per row;
//  - long rows: a block per row, or, when rows are too few to fill the GPU,
//    several blocks per row writing partial states that a second kernel
//    combines. The split depends only on the shape and the GPU's SM count, so
//    results are reproducible run to run.
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {

constexpr int kReduceThreads = 256;
constexpr int64_t kWarpRowMax = 1024;
constexpr int64_t kSplitChunk = 16384;  // elements per block when a row is split

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
__global__ void __launch_bounds__(kReduceThreads) combine_partials_kernel(R r, const S* partial, int64_t outer, int splits) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kReduceThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= outer) return;
  S s = r.init();
  for (int k = lane; k < splits; k += 32) s = r.combine(s, partial[row * splits + k]);
  s = warp_combine(r, s);
  if (lane == 0) r.finish(s, row);
}

int multiprocessor_count();

template <typename T, typename R>
int launch_reducer(const R& r, const T* in, int64_t outer, int64_t inner, CUstream_st* stream) {
  using S = decltype(r.init());
  if (outer == 0) return 0;
  constexpr int kRowsPerBlock = kReduceThreads / 32;
  if (inner <= kWarpRowMax) {
    const int64_t blocks = (outer + kRowsPerBlock - 1) / kRowsPerBlock;
    warp_per_row_kernel<<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(r, in, outer, inner);
    return static_cast<int>(cudaGetLastError());
  }
  const int64_t target_blocks = 4LL * multiprocessor_count();
  int64_t splits = (inner + kSplitChunk - 1) / kSplitChunk;
  const int64_t wanted = (target_blocks + outer - 1) / outer;
  if (splits > wanted) splits = wanted;
  if (splits < 1) splits = 1;
  if (outer > 65535) splits = 1;  // gridDim.y limit; rows are plenty then
  const int64_t chunk = (inner + splits - 1) / splits;
  if (outer > 65535) {
    // Too many long rows for gridDim.y: one warp each is still parallel enough.
    const int64_t blocks = (outer + kRowsPerBlock - 1) / kRowsPerBlock;
    warp_per_row_kernel<<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(r, in, outer, inner);
    return static_cast<int>(cudaGetLastError());
  }
  S* partial = nullptr;
  if (splits > 1) {
    cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), sizeof(S) * outer * splits, stream);
    if (err != cudaSuccess) return static_cast<int>(err);
  }
  dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(outer));
  block_per_chunk_kernel<<<grid, kReduceThreads, 0, stream>>>(r, in, inner, chunk, partial);
  if (splits > 1) {
    const int64_t blocks = (outer + kRowsPerBlock - 1) / kRowsPerBlock;
    combine_partials_kernel<<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(r, partial, outer,
                                                                                         static_cast<int>(splits));
    cudaFreeAsync(partial, stream);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace trainrun::cuda
