#pragma once
// The one elementwise loop of the CUDA kernels (the device half of
// TensorIterator): each thread computes operand pointers for its elements
// (element_access.h) and calls a functor on them. Each thread handles
// kUnroll elements a block-width apart, so loads stay coalesced and several
// are in flight at once.
#include <cuda_runtime.h>

#include "tensor/cuda/kernels/element_access.h"

namespace trainrun::cuda {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

template <int NOPS, typename F>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(ElementwiseArgs args, F f) {
  const int64_t tile = static_cast<int64_t>(kThreads) * kUnroll;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * tile; base < args.numel;
       base += static_cast<int64_t>(gridDim.x) * tile) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + threadIdx.x;
      if (i < args.numel) {
        char* p[NOPS];
        operand_pointers<NOPS>(args, i, p);
        f(p);
      }
    }
  }
}

// Queues f over every element of args on `stream`.
template <int NOPS, typename F>
int launch_elementwise(const ElementwiseArgs& args, CUstream_st* stream, F f) {
  if (args.numel == 0) return 0;
  const int64_t tile = static_cast<int64_t>(kThreads) * kUnroll;
  int64_t blocks = (args.numel + tile - 1) / tile;
  if (blocks > (int64_t(1) << 30)) blocks = int64_t(1) << 30;  // the loop strides over the rest
  elementwise_kernel<NOPS><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args, f);
  return static_cast<int>(cudaGetLastError());
}

// Blocks of 256 threads for a grid-stride loop over n elements.
inline unsigned grid_blocks(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b > (int64_t(1) << 30) ? (int64_t(1) << 30) : (b < 1 ? 1 : b));
}

// Runs its statement for each i in [0, n), spread over the whole grid.
#define TR_GRID_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Calls f(T{}) with T the CUDA type of dt.
template <typename F>
int visit_cuda_dtype(DType dt, F f) {
  switch (dt) {
    case DType::Bool: return f(bool{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int8: return f(int8_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float16: return f(__half{});
    case DType::BFloat16: return f(__nv_bfloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace trainrun::cuda
