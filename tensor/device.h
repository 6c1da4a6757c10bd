#pragma once
// Where a tensor's memory lives. CPU today; CUDA plugs in behind the same ops
// (tensor/cuda/) through the dispatcher, keyed by DispatchKey.
#include <cstdint>
#include <string>

namespace trainrun {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = -1;  // -1: the current device of that type

  Device() = default;
  Device(DeviceType t, int16_t i = -1) : type(t), index(i) {}  // NOLINT
  // Parses "cpu", "cuda", "cuda:1".
  explicit Device(const std::string& spec);
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};

}  // namespace trainrun
