#pragma once
// TR_HOST_DEVICE marks inline functions that both the C++ compiler (CPU
// kernels) and nvcc (CUDA kernels) build, so the two devices share one copy
// of their arithmetic.
#ifdef __CUDACC__
#define TR_HOST_DEVICE __host__ __device__
#else
#define TR_HOST_DEVICE
#endif
