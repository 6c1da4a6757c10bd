#pragma once
// TR_CUDA_CHECK(expr): throws CudaError naming the call, the error's name and
// description, and where, when a CUDA runtime call fails. TR_CUDA_QUERY does
// the same for queries, which also answer "not ready". For .cc files only:
// it includes the runtime API header.
#include <cuda_runtime_api.h>

#include "base/error.h"

namespace trainrun::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
// A cudaStreamQuery / cudaEventQuery result: true when the work is done,
// false (clearing the error) for cudaErrorNotReady; anything else throws.
bool query_done(cudaError_t err, const char* call, const char* file, int line);

}  // namespace trainrun::cuda

// TR_CUDA_QUERY(cudaEventQuery(e)): whether the queried work has finished.
#define TR_CUDA_QUERY(expr) ::trainrun::cuda::query_done((expr), #expr, __FILE__, __LINE__)

#define TR_CUDA_CHECK(expr)                                                            \
  do {                                                                                 \
    cudaError_t tr_cuda_err_ = (expr);                                                 \
    if (tr_cuda_err_ != cudaSuccess)                                                   \
      ::trainrun::cuda::throw_cuda_error(tr_cuda_err_, #expr, __FILE__, __LINE__);     \
  } while (0)
