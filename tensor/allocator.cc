#include "tensor/allocator.h"

#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace trainrun {
namespace {

class CPUAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    constexpr size_t kAlign = 64;
    size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
    void* p = rounded == 0 ? nullptr : std::aligned_alloc(kAlign, rounded);
    if (rounded != 0 && p == nullptr)
      throw ValueError(fmt::format("CPU allocator: out of memory allocating {} bytes", nbytes));
    return DataPtr(p, [](void* q) { std::free(q); }, Device(DeviceType::CPU));
  }
};

Allocator* g_allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator* cpu_allocator() {
  static CPUAllocator alloc;
  return &alloc;
}

void register_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<int>(type)] = allocator;
}

Allocator* allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  Allocator* a = g_allocators[static_cast<int>(device.type)];
  TR_CHECK(a != nullptr, NotImplementedError,
           "no allocator for device {}: trainrun was built without support for it", device.str());
  return a;
}

}  // namespace trainrun
