#pragma once
// The CUDA devices of this process: how many there are, which one is current,
// and why none is usable. Nothing here throws on a machine without a GPU
// except the calls that need one, and those name the reason.
#include <string>

#include "tensor/device.h"

namespace trainrun::cuda {

// Number of visible GPUs; 0 when there is no driver or no device.
int device_count();
// True when at least one GPU is usable.
bool is_available();
// Why is_available() is false (the runtime's error, named), or "" when it is true.
std::string unavailable_reason();
// Throws CudaError when `index` is not a usable device (naming the reason).
void check_device(int index);
// The current device of this thread (cudaGetDevice).
int current_device();
void set_device(int index);
// The index `d` refers to: its own, or the current device for "cuda".
int device_index(Device d);
// Waits for all work on `index` (-1: the current device).
void synchronize(int index = -1);
// The CUDA runtime version this build was compiled against, as "major.minor" (torch.version.cuda).
std::string compiled_version();
// Device name and memory, for messages and benchmarks.
std::string device_name(int index);
size_t total_memory(int index);

// Makes `index` current for a scope, restoring the previous device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace trainrun::cuda
