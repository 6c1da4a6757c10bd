#include "tensor/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace trainrun {
namespace {

// Blocks of 32 MiB and more are mapped directly, 2 MiB aligned, and marked
// for transparent huge pages: a fresh 64 MiB tensor then takes 32 page
// faults instead of 16384 (on a VM each fault costs microseconds). glibc
// maps blocks that large afresh on every malloc anyway (its mmap threshold
// stops growing at 32 MiB), so nothing is lost; smaller blocks stay with
// aligned_alloc, whose heap reuse avoids faults altogether.
class CPUAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    constexpr size_t kAlign = 64;
    if (nbytes >= kHugeThreshold) return allocate_huge(nbytes);
    size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
    void* p = rounded == 0 ? nullptr : std::aligned_alloc(kAlign, rounded);
    if (rounded != 0 && p == nullptr)
      throw ValueError(fmt::format("CPU allocator: out of memory allocating {} bytes", nbytes));
    return DataPtr(p, [](void* q) { std::free(q); }, Device(DeviceType::CPU));
  }

 private:
  static constexpr size_t kHugePage = size_t(2) << 20;
  static constexpr size_t kHugeThreshold = size_t(32) << 20;

  static DataPtr allocate_huge(size_t nbytes) {
    const size_t size = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
    // Over-map by one huge page, then unmap the unaligned head and the tail.
    void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
      throw ValueError(fmt::format("CPU allocator: out of memory allocating {} bytes (mmap failed)", nbytes));
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t end = start + size + kHugePage;
    if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
    void* p = reinterpret_cast<void*>(aligned);
    madvise(p, size, MADV_HUGEPAGE);  // advisory: without THP this is plain 4 KiB pages
    return DataPtr(p, [size](void* q) { munmap(q, size); }, Device(DeviceType::CPU));
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
