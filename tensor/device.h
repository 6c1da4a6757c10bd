#pragma once
// Where a tensor's memory lives: the CPU, a GPU (tensor/cuda/), or nowhere
// ("meta": shapes and dtypes only, for building a model too big for one
// process before sharding it, as PyTorch's meta device). Each has its own
// kernels behind the same ops, keyed by DispatchKey.
#include <cstdint>
#include <string>

namespace trainrun {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1, Meta = 2 };
constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = -1;  // -1: the current device of that type

  Device() = default;
  Device(DeviceType t, int16_t i = -1) : type(t), index(i) {}  // NOLINT
  // Parses "cpu", "cuda", "cuda:1", "meta".
  explicit Device(const std::string& spec);
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_meta() const { return type == DeviceType::Meta; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
  // "cpu", "cuda" or "meta".
  const char* type_name() const;
};

// Where the factories of the Python API (trainrun.zeros(..., device=None))
// and the layers' constructors put new tensors on this thread: the CPU
// unless set (trainrun.set_default_device, `with trainrun.device("meta")`).
// Kernels never consult it: their scratch and results follow their inputs.
Device default_device();
void set_default_device(Device device);

class DefaultDeviceGuard {
 public:
  explicit DefaultDeviceGuard(Device device) : saved_(default_device()) { set_default_device(device); }
  ~DefaultDeviceGuard() { set_default_device(saved_); }
  DefaultDeviceGuard(const DefaultDeviceGuard&) = delete;
  DefaultDeviceGuard& operator=(const DefaultDeviceGuard&) = delete;

 private:
  Device saved_;
};

}  // namespace trainrun
