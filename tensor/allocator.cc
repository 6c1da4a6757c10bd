#include "tensor/allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "tensor/record_function.h"

namespace trainrun {
namespace {

// Blocks of 16 KiB and more are cached when freed and handed out again
// for the same (rounded) size: a training step allocates the same shapes
// every time, and without the cache each of its temporaries would come back
// from the kernel as fresh pages, one fault per 4 KiB. glibc maps large
// blocks, or takes them from the top of its heap and gives that back (trims
// it) once more than its threshold (128 KiB) is free there, as it is after a
// chain of ops frees its temporaries: y * (g - sum(g * y)) on [8, 4, 64, 64]
// (512 KiB each) took 3.5 ms instead of 0.1 ms that way, and a transformer
// block's eval forward on [6, 40, 128] (its activations 120 KiB each, when
// only blocks from 128 KiB were cached) 2.3-3.4 ms instead of 0.8 ms.
// Sizes round up to 4 KiB below 128 KiB, 16 KiB below 1 MiB and 64 KiB
// above (at most 25% more, for the smallest). The cache holds at most
// TRAINRUN_CPU_CACHE_MB (default 1024; 0 turns it off); cpu_empty_cache()
// gives it all back.
//
// Blocks of 32 MiB and more are mapped directly, 2 MiB aligned, and marked
// for transparent huge pages: a fresh 64 MiB tensor then takes 32 page
// faults instead of 16384. Smaller blocks use aligned_alloc.
class CPUAllocator final : public Allocator {
 public:
  CPUAllocator() {
    const char* env = std::getenv("TRAINRUN_CPU_CACHE_MB");
    if (env != nullptr && *env != '\0') cache_limit_ = static_cast<size_t>(std::strtoull(env, nullptr, 10)) << 20;
  }

  DataPtr allocate(size_t nbytes) override {
    constexpr size_t kAlign = 64;
    if (nbytes < kCacheThreshold) {
      size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
      void* p = rounded == 0 ? nullptr : std::aligned_alloc(kAlign, rounded);
      if (rounded != 0 && p == nullptr)
        throw ValueError(fmt::format("CPU allocator: out of memory allocating {} bytes", nbytes));
      count_allocated(rounded);
      return DataPtr(
          p,
          [this, rounded](void* q) {
            std::free(q);
            count_freed(rounded);
          },
          Device(DeviceType::CPU));
    }
    const size_t granule = nbytes < kMediumBlock ? kPageGranule : nbytes < kLargeBlock ? kSmallGranule : kCacheGranule;
    const size_t size = (nbytes + granule - 1) / granule * granule;
    void* p = take_cached(size);
    if (p == nullptr) p = size >= kHugeThreshold ? map_huge(size) : allocate_block(size);
    count_allocated(size);
    return DataPtr(
        p,
        [this, size](void* q) {
          count_freed(size);
          release(q, size);
        },
        Device(DeviceType::CPU));
  }

  CpuMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {allocated_.load(), peak_.load(), cached_bytes_};
  }
  void reset_peak() { peak_.store(allocated_.load()); }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, blocks] : cached_)
      for (void* p : blocks) free_block(p, size);
    cached_.clear();
    cached_bytes_ = 0;
  }

 private:
  static constexpr size_t kCacheThreshold = size_t(16) << 10;
  static constexpr size_t kPageGranule = size_t(4) << 10;  // below kMediumBlock
  static constexpr size_t kMediumBlock = size_t(128) << 10;
  static constexpr size_t kSmallGranule = size_t(16) << 10;  // below kLargeBlock
  static constexpr size_t kLargeBlock = size_t(1) << 20;
  static constexpr size_t kCacheGranule = size_t(64) << 10;
  static constexpr size_t kHugePage = size_t(2) << 20;
  static constexpr size_t kHugeThreshold = size_t(32) << 20;

  void* take_cached(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cached_.find(size);
    if (it == cached_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= size;
    return p;
  }

  void release(void* p, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_bytes_ + size <= cache_limit_) {
        cached_[size].push_back(p);
        cached_bytes_ += size;
        return;
      }
    }
    free_block(p, size);
  }

  static void* allocate_block(size_t size) {
    void* p = std::aligned_alloc(size < kLargeBlock ? 64 : kCacheGranule, size);
    if (p == nullptr) throw ValueError(fmt::format("CPU allocator: out of memory allocating {} bytes", size));
    return p;
  }

  static void free_block(void* p, size_t size) {
    if (size >= kHugeThreshold)
      munmap(p, (size + kHugePage - 1) / kHugePage * kHugePage);
    else
      std::free(p);
  }

  static void* map_huge(size_t nbytes) {
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
    return p;
  }

  void count_allocated(size_t bytes) {
    profiling::note_memory(static_cast<int64_t>(bytes));
    const size_t now = allocated_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    size_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void count_freed(size_t bytes) {
    profiling::note_memory(-static_cast<int64_t>(bytes));
    allocated_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  std::atomic<size_t> allocated_{0}, peak_{0};
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> cached_;
  size_t cached_bytes_ = 0;
  size_t cache_limit_ = size_t(1024) << 20;
};

CPUAllocator& the_cpu_allocator() {
  // Never destroyed: tensors freed during static destruction still find it.
  static CPUAllocator* alloc = new CPUAllocator();
  return *alloc;
}

// Meta tensors hold no memory: their storage only records its size.
class MetaAllocator : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    (void)nbytes;
    return DataPtr(nullptr, nullptr, Device(DeviceType::Meta));
  }
};

Allocator* g_allocators[kNumDeviceTypes] = {};

}  // namespace

Allocator* cpu_allocator() { return &the_cpu_allocator(); }

void cpu_empty_cache() { the_cpu_allocator().empty_cache(); }

CpuMemoryStats cpu_memory_stats() { return the_cpu_allocator().stats(); }

void cpu_reset_peak_memory_stats() { the_cpu_allocator().reset_peak(); }

void register_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<int>(type)] = allocator;
}

Allocator* allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  if (device.is_meta()) {
    static MetaAllocator meta;
    return &meta;
  }
  Allocator* a = g_allocators[static_cast<int>(device.type)];
  TR_CHECK(a != nullptr, NotImplementedError,
           "no allocator for device {}: trainrun was built without support for it", device.str());
  return a;
}

}  // namespace trainrun
