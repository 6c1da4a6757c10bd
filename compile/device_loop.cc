#include "compile/device_loop.h"

#include <map>
#include <mutex>

namespace trainrun::compile {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<DeviceType, DeviceLoopBackend*>& registry() {
  static std::map<DeviceType, DeviceLoopBackend*> r;
  return r;
}

}  // namespace

void register_device_loop_backend(DeviceType type, DeviceLoopBackend* backend) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[type] = backend;
}

DeviceLoopBackend* device_loop_backend(DeviceType type) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(type);
  return it == registry().end() ? nullptr : it->second;
}

}  // namespace trainrun::compile
