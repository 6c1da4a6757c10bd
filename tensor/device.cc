#include "tensor/device.h"

#include "base/error.h"

namespace trainrun {

Device::Device(const std::string& spec) {
  std::string kind = spec, idx;
  auto colon = spec.find(':');
  if (colon != std::string::npos) { kind = spec.substr(0, colon); idx = spec.substr(colon + 1); }
  if (kind == "cpu") type = DeviceType::CPU;
  else if (kind == "cuda") type = DeviceType::CUDA;
  else if (kind == "meta") type = DeviceType::Meta;
  else throw ValueError(fmt::format("invalid device string '{}': expected 'cpu', 'cuda', 'cuda:N' or 'meta'", spec));
  if (!idx.empty()) {
    size_t used = 0;
    int v = -1;
    try { v = std::stoi(idx, &used); } catch (...) { used = 0; }
    TR_CHECK(used == idx.size() && v >= 0 && v < 32768, ValueError, "invalid device index in '{}'", spec);
    index = static_cast<int16_t>(v);
  }
}

const char* Device::type_name() const {
  switch (type) {
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
    default: return "cpu";
  }
}

std::string Device::str() const {
  std::string s = type_name();
  if (index >= 0) s += ":" + std::to_string(index);
  return s;
}

namespace {
thread_local Device tls_default_device;
}  // namespace

Device default_device() { return tls_default_device; }
void set_default_device(Device device) { tls_default_device = device; }

}  // namespace trainrun
