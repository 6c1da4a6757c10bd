#include "launcher/gpu_count.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace trainrun {
namespace {

// The three driver entry points we need, by their C signatures (CUresult is an int).
using CuInit = int (*)(unsigned int flags);
using CuDeviceGetCount = int (*)(int* count);
using CuGetErrorString = int (*)(int error, const char** text);

std::string driver_error(void* lib, int code) {
  auto get_error = reinterpret_cast<CuGetErrorString>(dlsym(lib, "cuGetErrorString"));
  const char* text = nullptr;
  if (get_error != nullptr && get_error(code, &text) == 0 && text != nullptr) return fmt::format("{} ({})", text, code);
  return fmt::format("CUDA driver error {}", code);
}

}  // namespace

GpuCount count_gpus() {
  GpuCount result;
  // RTLD_LOCAL: the driver's symbols stay out of the launcher's namespace.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    result.reason = "no CUDA driver (libcuda.so.1 could not be loaded)";
    return result;
  }
  auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  if (init == nullptr || get_count == nullptr) {
    result.reason = "the CUDA driver library lacks cuInit/cuDeviceGetCount";
  } else if (int rc = init(0); rc != 0) {
    result.reason = "the CUDA driver did not initialise: " + driver_error(lib, rc);
  } else if (int n = 0; (rc = get_count(&n)) != 0) {
    result.reason = "the CUDA driver could not count devices: " + driver_error(lib, rc);
  } else if (n == 0) {
    result.reason = "the CUDA driver sees no device (check CUDA_VISIBLE_DEVICES)";
  } else {
    result.count = n;
  }
  // The driver stays loaded: unloading it after cuInit is not supported.
  return result;
}

}  // namespace trainrun
