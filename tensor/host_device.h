#pragma once
// TR_HOST_DEVICE marks inline functions that both the C++ compiler (CPU
// kernels) and nvcc (CUDA kernels) build, so the two devices share one copy
// of their arithmetic.
#ifdef __CUDACC__
#define TR_HOST_DEVICE __host__ __device__
#else
#define TR_HOST_DEVICE
#endif

// TR_FORCEINLINE marks the per-element helpers that must inline into the
// kernels' loops (as __forceinline__ does under nvcc).
#ifdef __CUDACC__
#define TR_FORCEINLINE __forceinline__
#else
#define TR_FORCEINLINE inline __attribute__((always_inline))
#endif
