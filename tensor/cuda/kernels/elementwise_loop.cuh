#pragma once
// The one elementwise loop of the CUDA kernels (the device half of
// TensorIterator): each thread computes operand pointers for its elements and
// calls a functor on them. Contiguous launches skip the index arithmetic; each
// thread handles kUnroll elements a block-width apart, so loads stay
// coalesced and several are in flight at once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "tensor/cuda/kernels/kernel_args.h"

namespace trainrun::cuda {

// The CUDA type of each dtype, and the type math is done in.
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<__half> { using type = float; };
template <> struct OpMath<__nv_bfloat16> { using type = float; };
template <typename T> using opmath = typename OpMath<T>::type;

template <typename T>
constexpr bool is_reduced_float = std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;

template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same<To, From>::value) {
    return v;
  } else if constexpr (is_reduced_float<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same<To, bool>::value) {
    return v != From(0);
  } else if constexpr (std::is_same<To, __half>::value) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same<To, __nv_bfloat16>::value) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename T>
__device__ __forceinline__ opmath<T> load(const char* p) {
  return convert<opmath<T>>(*reinterpret_cast<const T*>(p));
}

template <typename T, typename V>
__device__ __forceinline__ void store(char* p, V v) {
  *reinterpret_cast<T*>(p) = convert<T>(v);
}

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

template <int NOPS>
__device__ __forceinline__ void operand_pointers(const ElementwiseArgs& a, int64_t i, char* (&p)[NOPS]) {
  if (a.contiguous) {
#pragma unroll
    for (int k = 0; k < NOPS; ++k)
      p[k] = a.data[k] != nullptr ? a.data[k] + i * a.element_size[k] : const_cast<char*>(a.scalars[k]);
    return;
  }
  int64_t offsets[NOPS] = {};
  int64_t rem = i;
  for (int d = 0; d < a.ndim; ++d) {
    const int64_t idx = rem % a.sizes[d];
    rem /= a.sizes[d];
#pragma unroll
    for (int k = 0; k < NOPS; ++k) offsets[k] += idx * a.strides[d][k];
  }
#pragma unroll
  for (int k = 0; k < NOPS; ++k)
    p[k] = a.data[k] != nullptr ? a.data[k] + offsets[k] : const_cast<char*>(a.scalars[k]);
}

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

// Calls f(T{}) with T the CUDA type of dt; returns cudaErrorInvalidValue for
// a dtype the caller's `allowed` predicate rejects.
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

template <typename T>
__host__ __device__ constexpr bool is_floating_cuda() {
  return std::is_floating_point<T>::value || is_reduced_float<T>;
}

// The value of a KernelScalar in T's math type.
template <typename T>
__host__ __device__ opmath<T> scalar_as(KernelScalar s) {
  if constexpr (is_floating_cuda<T>()) return static_cast<opmath<T>>(s.f);
  else if constexpr (std::is_same<T, bool>::value) return s.i != 0;
  else return static_cast<T>(s.i);
}

}  // namespace trainrun::cuda
