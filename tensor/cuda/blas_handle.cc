#include "tensor/cuda/blas_handle.h"

#include <cublas_v2.h>

#include <atomic>
#include <unordered_map>

#include "base/error.h"
#include "tensor/cuda/runtime.h"
#include "tensor/cuda/stream.h"

namespace trainrun::cuda {
namespace {

std::atomic<bool> g_allow_tf32{false};

// Handles live as long as their thread; cuBLAS frees them at destroy.
struct ThreadHandles {
  std::unordered_map<int, cublasHandle_t> per_device;
  ~ThreadHandles() {
    for (auto& [device, handle] : per_device) cublasDestroy(handle);
  }
};

}  // namespace

cublasContext* cublas_handle(int device) {
  thread_local ThreadHandles handles;
  auto it = handles.per_device.find(device);
  if (it == handles.per_device.end()) {
    DeviceGuard guard(device);
    cublasHandle_t h = nullptr;
    cublasStatus_t st = cublasCreate(&h);
    TR_CHECK(st == CUBLAS_STATUS_SUCCESS, CudaError, "cublasCreate on cuda:{} failed: {} ({})", device,
             cublasGetStatusName(st), cublasGetStatusString(st));
    it = handles.per_device.emplace(device, h).first;
  }
  cublasStatus_t st = cublasSetStream(it->second, current_stream(device).handle());
  TR_CHECK(st == CUBLAS_STATUS_SUCCESS, CudaError, "cublasSetStream failed: {}", cublasGetStatusName(st));
  return it->second;
}

void set_allow_tf32(bool allow) { g_allow_tf32 = allow; }

bool allow_tf32() { return g_allow_tf32; }

}  // namespace trainrun::cuda
