#pragma once
// TR_CUDA_CHECK(expr): throws CudaError naming the call, the error's name and
// description, and where, when a CUDA runtime call fails. For .cc files only:
// it includes the runtime API header.
#include <cuda_runtime_api.h>

#include "tensor/error.h"

namespace trainrun::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

}  // namespace trainrun::cuda

#define TR_CUDA_CHECK(expr)                                                            \
  do {                                                                                 \
    cudaError_t tr_cuda_err_ = (expr);                                                 \
    if (tr_cuda_err_ != cudaSuccess)                                                   \
      ::trainrun::cuda::throw_cuda_error(tr_cuda_err_, #expr, __FILE__, __LINE__);     \
  } while (0)
