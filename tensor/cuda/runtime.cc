#include "tensor/cuda/runtime.h"

#include <mutex>

#include "tensor/cuda/cuda_check.h"

namespace trainrun::cuda {
namespace {

struct DeviceProbe {
  int count = 0;
  std::string reason;
};

// cudaGetDeviceCount once per process: the answer does not change, and on a
// machine without a driver every call would pay for loading it again.
const DeviceProbe& probe() {
  static DeviceProbe* p = [] {
    auto* r = new DeviceProbe();
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
      const char* hint = err == cudaErrorInsufficientDriver ? " (no NVIDIA driver is loaded, or it is older than CUDA 13)"
                         : err == cudaErrorNoDevice         ? " (the driver sees no GPU; check CUDA_VISIBLE_DEVICES)"
                                                            : "";
      r->reason = fmt::format("CUDA is not available: cudaGetDeviceCount returned {}: {}{}", cudaGetErrorName(err),
                              cudaGetErrorString(err), hint);
    } else if (n == 0) {
      r->reason = "CUDA is not available: no GPU is visible (CUDA_VISIBLE_DEVICES may hide them)";
    }
    r->count = err == cudaSuccess ? n : 0;
    return r;
  }();
  return *p;
}

}  // namespace

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  cudaGetLastError();
  throw CudaError(fmt::format("CUDA error {} ({}) from {} at {}:{}", cudaGetErrorName(err), cudaGetErrorString(err),
                              call, file, line));
}

bool query_done(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  throw_cuda_error(err, call, file, line);
}

int device_count() { return probe().count; }

bool is_available() { return probe().count > 0; }

std::string unavailable_reason() { return probe().reason; }

void check_device(int index) {
  const DeviceProbe& p = probe();
  if (p.count == 0) throw CudaError(p.reason);
  TR_CHECK(index >= 0 && index < p.count, CudaError, "invalid CUDA device index {}: this process sees {} GPU{}", index,
           p.count, p.count == 1 ? "" : "s");
}

int current_device() {
  check_device(0);
  int d = 0;
  TR_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int index) {
  check_device(index);
  TR_CUDA_CHECK(cudaSetDevice(index));
}

int device_index(Device d) {
  TR_CHECK(d.is_cuda(), TypeError, "expected a CUDA device, got {}", d.str());
  if (d.index < 0) return current_device();
  check_device(d.index);
  return d.index;
}

void synchronize(int index) {
  DeviceGuard guard(index < 0 ? current_device() : index);
  TR_CUDA_CHECK(cudaDeviceSynchronize());
}

std::string device_name(int index) {
  check_device(index);
  cudaDeviceProp prop;
  TR_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

size_t total_memory(int index) {
  check_device(index);
  cudaDeviceProp prop;
  TR_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.totalGlobalMem;
}

DeviceGuard::DeviceGuard(int index) {
  previous_ = current_device();
  if (previous_ != index) set_device(index);
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

std::string compiled_version() {
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
}

}  // namespace trainrun::cuda
