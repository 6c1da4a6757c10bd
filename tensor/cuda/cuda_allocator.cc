#include "tensor/cuda/cuda_allocator.h"

#include <array>
#include <atomic>
#include <mutex>

#include "tensor/allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/runtime.h"

namespace trainrun::cuda {
namespace {

constexpr int kMaxDevices = 64;

// Device memory through the CUDA runtime, for one device.
class CudaMemoryBackend final : public DeviceMemoryBackend {
 public:
  explicit CudaMemoryBackend(int device) : device_(device) {}

  void* malloc(size_t size) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: the allocator frees its cache and retries
      return nullptr;
    }
    TR_CUDA_CHECK(err);
    return p;
  }

  void free(void* ptr) override {
    DeviceGuard guard(device_);
    TR_CUDA_CHECK(cudaFree(ptr));
  }

  void* record_event(StreamId stream) override {
    DeviceGuard guard(device_);
    cudaEvent_t event;
    TR_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    TR_CUDA_CHECK(cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream)));
    return event;
  }

  bool event_done(void* event) override {
    return TR_CUDA_QUERY(cudaEventQuery(static_cast<cudaEvent_t>(event)));
  }

  void destroy_event(void* event) override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

  void synchronize() override {
    DeviceGuard guard(device_);
    TR_CUDA_CHECK(cudaDeviceSynchronize());
  }

  std::pair<size_t, size_t> memory_info() override {
    DeviceGuard guard(device_);
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) cudaGetLastError();
    return {free_bytes, total};
  }

 private:
  int device_;
};

struct Allocators {
  std::array<std::once_flag, kMaxDevices> created;
  std::array<std::atomic<CachingAllocator*>, kMaxDevices> per_device{};
};

Allocators& allocators() {
  static Allocators* a = new Allocators();  // never destroyed: tensors may die during static destruction
  return *a;
}

// The Allocator interface of the tensor core, for DeviceType::CUDA.
class CudaTensorAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override { return allocate(nbytes, Device(DeviceType::CUDA, -1)); }

  DataPtr allocate(size_t nbytes, Device device) override {
    const int index = device_index(device);
    CachingAllocator& alloc = caching_allocator(index);
    void* p = alloc.allocate(nbytes, current_stream(index).id());
    return DataPtr(p, [&alloc](void* q) { alloc.free(q); }, Device(DeviceType::CUDA, static_cast<int16_t>(index)));
  }
};

const bool registered = [] {
  static CudaTensorAllocator* instance = new CudaTensorAllocator();
  register_allocator(DeviceType::CUDA, instance);
  return true;
}();

}  // namespace

CachingAllocator& caching_allocator(int device) {
  device = device < 0 ? current_device() : device;
  check_device(device);
  TR_CHECK(device < kMaxDevices, CudaError, "CUDA device index {} is beyond the {} supported", device, kMaxDevices);
  Allocators& a = allocators();
  std::call_once(a.created[device], [&] {
    a.per_device[device] =
        new CachingAllocator(std::make_unique<CudaMemoryBackend>(device), fmt::format("cuda:{}", device));
  });
  return *a.per_device[device].load();
}

MemoryStats memory_stats(int device) { return caching_allocator(device).stats(); }

void reset_peak_memory_stats(int device) { caching_allocator(device).reset_peak_stats(); }

void empty_cache() {
  Allocators& a = allocators();
  for (int d = 0; d < device_count() && d < kMaxDevices; ++d)
    if (CachingAllocator* alloc = a.per_device[d].load()) alloc->empty_cache();
}

void record_stream(const Tensor& t, const Stream& stream) {
  TR_CHECK(t.device().is_cuda(), TypeError, "record_stream: expected a CUDA tensor, got one on {}", t.device().str());
  caching_allocator(t.device().index).record_stream(t.impl()->storage()->data(), stream.id());
}

}  // namespace trainrun::cuda
