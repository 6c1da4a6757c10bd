#pragma once
// How the CUDA kernels read and write one element: the CUDA type of each
// dtype and the type its math runs in, conversions between them, and the
// operand pointers of element i of an elementwise launch. Everything here is
// host-and-device, so CPU tests run the kernels' per-element code on CPU
// buffers (tests/tensor/cuda/kernel_elements_test.cc).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "tensor/cuda/kernels/kernel_args.h"
#include "tensor/host_device.h"

namespace trainrun::cuda {

// The math type of each CUDA element type: float for the 16-bit floats.
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<__half> { using type = float; };
template <> struct OpMath<__nv_bfloat16> { using type = float; };
template <typename T> using opmath = typename OpMath<T>::type;

template <typename T>
constexpr bool is_reduced_float = std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;

template <typename T>
TR_HOST_DEVICE constexpr bool is_floating_cuda() {
  return std::is_floating_point<T>::value || is_reduced_float<T>;
}

// Conversions follow tensor/cpu/convert.h's rules: a float goes to uint8
// through int64 (the GPU's own float-to-unsigned conversion saturates -1.0 to
// 0 where the CPU gives 255).
template <typename To, typename From>
TR_HOST_DEVICE TR_FORCEINLINE constexpr To convert(From v) {
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
  } else if constexpr (std::is_same<To, uint8_t>::value && std::is_floating_point<From>::value) {
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename T>
TR_HOST_DEVICE TR_FORCEINLINE opmath<T> load(const char* p) {
  return convert<opmath<T>>(*reinterpret_cast<const T*>(p));
}

template <typename T, typename V>
TR_HOST_DEVICE TR_FORCEINLINE void store(char* p, V v) {
  *reinterpret_cast<T*>(p) = convert<T>(v);
}

// The value of a KernelScalar in T's math type.
template <typename T>
TR_HOST_DEVICE inline opmath<T> scalar_as(KernelScalar s) {
  if constexpr (is_floating_cuda<T>()) return static_cast<opmath<T>>(s.f);
  else if constexpr (std::is_same<T, bool>::value) return s.i != 0;
  else return static_cast<T>(s.i);
}

// The address of element i of each operand; a scalar operand's is its slot
// in `scalar_slots`. Sizes are innermost first, so i's coordinates come out
// by repeated division; contiguous launches skip that. (nvcc unrolls the NOPS
// loops.) Kernels pass a shared-memory copy of args.scalars, never the kernel
// parameter itself: a pointer into a parameter makes nvcc copy the whole
// ElementwiseArgs (~760 bytes) to every thread's stack, which cost add 95% of
// the memory bandwidth on an H200.
template <int NOPS>
TR_HOST_DEVICE TR_FORCEINLINE void operand_pointers(const ElementwiseArgs& a, int64_t i, char* (&p)[NOPS],
                                                    char (*scalar_slots)[8]) {
  if (a.contiguous) {
    for (int k = 0; k < NOPS; ++k) p[k] = a.data[k] != nullptr ? a.data[k] + i * a.element_size[k] : scalar_slots[k];
    return;
  }
  int64_t offsets[NOPS] = {};
  int64_t rem = i;
  for (int d = 0; d < a.ndim; ++d) {
    const int64_t idx = rem % a.sizes[d];
    rem /= a.sizes[d];
    for (int k = 0; k < NOPS; ++k) offsets[k] += idx * a.strides[d][k];
  }
  for (int k = 0; k < NOPS; ++k) p[k] = a.data[k] != nullptr ? a.data[k] + offsets[k] : scalar_slots[k];
}

// Adds v to *address: atomically on the device, plainly on the host (where
// the per-element code runs one element at a time).
template <typename T>
TR_HOST_DEVICE inline void atomic_add(T* address, opmath<T> v) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same<T, int64_t>::value) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(v));
  } else if constexpr (is_reduced_float<T>) {
    atomicAdd(address, convert<T>(v));
  } else {
    atomicAdd(address, static_cast<T>(v));
  }
#else
  *address = convert<T>(convert<opmath<T>>(*address) + v);
#endif
}

template <typename T>
constexpr bool has_atomic_add = std::is_same<T, float>::value || std::is_same<T, double>::value ||
                                std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value ||
                                is_reduced_float<T>;

}  // namespace trainrun::cuda
