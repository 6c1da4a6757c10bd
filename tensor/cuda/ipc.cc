#include "tensor/cuda/ipc.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "tensor/cuda/cuda_allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/runtime.h"
#include "tensor/cuda/stream.h"

namespace trainrun::cuda {
namespace {

// The producer's side: each lease's event, kept alive until the lease goes
// (a consumer opening the handle of a destroyed event is undefined).
struct Exports {
  std::mutex mu;
  std::map<std::pair<int, uintptr_t>, std::deque<cudaEvent_t>> events;
};

// The consumer's side: allocations of other processes open here, by handle.
struct OpenAllocation {
  void* base = nullptr;
  int storages = 0;
};
struct Imports {
  std::mutex mu;
  std::map<std::pair<int, std::string>, OpenAllocation> open;
};

// Never destroyed: storages may die during static destruction.
Exports& exports() {
  static Exports* e = new Exports();
  return *e;
}
Imports& imports() {
  static Imports* i = new Imports();
  return *i;
}

}  // namespace

IpcHandle export_storage(const StorageImpl& storage) {
  TR_CHECK(storage.device().is_cuda(), TypeError, "export_storage: a storage on {} is not a CUDA storage",
           storage.device().str());
  const int device = device_index(storage.device());
  DeviceGuard guard(device);
  CachingAllocator& alloc = caching_allocator(device);
  void* block = storage.data();
  auto [base, bytes] = alloc.segment_of(block);  // throws for memory the allocator did not hand out
  IpcHandle h;
  h.device = device;
  h.segment_bytes = bytes;
  h.offset = static_cast<size_t>(static_cast<char*>(block) - static_cast<char*>(base));
  h.nbytes = storage.nbytes();
  h.block = reinterpret_cast<uintptr_t>(block);
  cudaIpcMemHandle_t mem;
  TR_CUDA_CHECK(cudaIpcGetMemHandle(&mem, base));
  h.memory.assign(reinterpret_cast<const char*>(&mem), sizeof(mem));
  cudaEvent_t event;
  TR_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventInterprocess));
  TR_CUDA_CHECK(cudaEventRecord(event, current_stream(device).handle()));
  cudaIpcEventHandle_t ev;
  TR_CUDA_CHECK(cudaIpcGetEventHandle(&ev, event));
  h.event.assign(reinterpret_cast<const char*>(&ev), sizeof(ev));
  alloc.hold(block);
  std::lock_guard<std::mutex> lock(exports().mu);
  exports().events[{device, h.block}].push_back(event);
  return h;
}

void release_export(int device, uintptr_t block) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(exports().mu);
    auto it = exports().events.find({device, block});
    TR_CHECK(it != exports().events.end() && !it->second.empty(), ValueError,
             "release_export: cuda:{} block {:#x} has no lease from this process", device, block);
    event = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) exports().events.erase(it);
  }
  DeviceGuard guard(device);
  cudaEventDestroy(event);
  caching_allocator(device).release_hold(reinterpret_cast<void*>(block));
}

size_t exported_blocks_leased() {
  std::lock_guard<std::mutex> lock(exports().mu);
  size_t n = 0;
  for (const auto& [key, events] : exports().events) n += events.size();
  return n;
}

Storage storage_from_ipc_handle(const IpcHandle& h, std::function<void()> on_release) {
  TR_CHECK(h.memory.size() == sizeof(cudaIpcMemHandle_t) && h.event.size() == sizeof(cudaIpcEventHandle_t),
           ValueError, "storage_from_ipc_handle: a handle of {} and an event of {} bytes are not CUDA IPC handles",
           h.memory.size(), h.event.size());
  TR_CHECK(h.offset + h.nbytes <= h.segment_bytes, ValueError,
           "storage_from_ipc_handle: {} bytes at offset {} do not fit the exported allocation of {} bytes", h.nbytes,
           h.offset, h.segment_bytes);
  check_device(h.device);
  DeviceGuard guard(h.device);
  const std::pair<int, std::string> key{h.device, h.memory};
  void* base = nullptr;
  {
    std::lock_guard<std::mutex> lock(imports().mu);
    OpenAllocation& a = imports().open[key];
    if (a.base == nullptr) {
      cudaIpcMemHandle_t mem;
      std::memcpy(&mem, h.memory.data(), sizeof(mem));
      const cudaError_t err = cudaIpcOpenMemHandle(&a.base, mem, cudaIpcMemLazyEnablePeerAccess);
      if (err != cudaSuccess) {
        imports().open.erase(key);
        TR_CUDA_CHECK(err);
      }
    }
    a.storages += 1;
    base = a.base;
  }
  // This process's work on the memory comes after the producer's work up to the export.
  cudaIpcEventHandle_t ev;
  std::memcpy(&ev, h.event.data(), sizeof(ev));
  cudaEvent_t event;
  TR_CUDA_CHECK(cudaIpcOpenEventHandle(&event, ev));
  TR_CUDA_CHECK(cudaStreamWaitEvent(current_stream(h.device).handle(), event, 0));
  cudaEventDestroy(event);
  const int device = h.device;
  auto deleter = [key, device, release = std::move(on_release)](void*) {
    // The producer may reuse the block once released: this process's queued work on it must be done.
    {
      DeviceGuard g(device);
      cudaDeviceSynchronize();
      std::lock_guard<std::mutex> lock(imports().mu);
      auto it = imports().open.find(key);
      if (it != imports().open.end() && --it->second.storages == 0) {
        cudaIpcCloseMemHandle(it->second.base);
        imports().open.erase(it);
      }
    }
    if (release) release();
  };
  return Storage::make(DataPtr(static_cast<char*>(base) + h.offset, std::move(deleter),
                               Device(DeviceType::CUDA, static_cast<int16_t>(device))),
                       h.nbytes);
}

size_t open_ipc_allocations() {
  std::lock_guard<std::mutex> lock(imports().mu);
  return imports().open.size();
}

}  // namespace trainrun::cuda
