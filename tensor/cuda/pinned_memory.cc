#include "tensor/cuda/pinned_memory.h"

#include <map>
#include <mutex>
#include <vector>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/runtime.h"
#include "tensor/factories.h"
#include "tensor/views.h"

namespace trainrun::cuda {
namespace {

struct PinnedBlock {
  char* ptr;
  size_t size;
  bool in_use = false;
  std::vector<std::pair<int, cudaEvent_t>> events;  // (device, event) of copies queued on it
};

class PinnedMemoryPool {
 public:
  DataPtr allocate(size_t nbytes) {
    const size_t size = round(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [base, block] : blocks_) {
      if (!block->in_use && block->size == size && events_done(block)) {
        block->in_use = true;
        return wrap(block);
      }
    }
    check_device(0);  // names the reason when there is no GPU
    void* p = nullptr;
    TR_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocDefault));
    auto* block = new PinnedBlock{static_cast<char*>(p), size};
    block->in_use = true;
    blocks_[block->ptr] = block;
    return wrap(block);
  }

  PinnedBlock* find(const void* ptr) {
    auto it = blocks_.upper_bound(static_cast<char*>(const_cast<void*>(ptr)));
    if (it == blocks_.begin()) return nullptr;
    --it;
    PinnedBlock* b = it->second;
    return static_cast<const char*>(ptr) < b->ptr + b->size ? b : nullptr;
  }

  bool contains(const void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    return find(ptr) != nullptr;
  }

  void record_use(const void* ptr, const Stream& stream) {
    std::lock_guard<std::mutex> lock(mu_);
    PinnedBlock* b = find(ptr);
    if (b == nullptr) return;  // pinned by someone else: their lifetime rules apply
    DeviceGuard guard(stream.device());
    cudaEvent_t event;
    TR_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    TR_CUDA_CHECK(cudaEventRecord(event, stream.handle()));
    b->events.emplace_back(stream.device(), event);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      PinnedBlock* b = it->second;
      if (b->in_use || !events_done(b)) {
        ++it;
        continue;
      }
      cudaFreeHost(b->ptr);
      delete b;
      it = blocks_.erase(it);
    }
  }

 private:
  static size_t round(size_t n) {
    size_t size = 512;
    while (size < n) size <<= 1;
    return size;
  }

  static bool events_done(PinnedBlock* b) {
    for (auto it = b->events.begin(); it != b->events.end();) {
      if (!TR_CUDA_QUERY(cudaEventQuery(it->second))) return false;
      cudaEventDestroy(it->second);
      it = b->events.erase(it);
    }
    return true;
  }

  DataPtr wrap(PinnedBlock* block) {
    return DataPtr(block->ptr, [this, block](void*) {
      std::lock_guard<std::mutex> lock(mu_);
      block->in_use = false;
    }, Device(DeviceType::CPU));
  }

  std::mutex mu_;
  std::map<char*, PinnedBlock*> blocks_;
};

PinnedMemoryPool& pool() {
  static PinnedMemoryPool* p = new PinnedMemoryPool();  // never destroyed: tensors may outlive statics
  return *p;
}

}  // namespace

Tensor pin_memory(const Tensor& t) {
  TR_CHECK(t.device().is_cpu(), TypeError, "pin_memory: only CPU tensors can be pinned, got one on {}",
           t.device().str());
  if (is_pinned(t)) return t;
  const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
  Storage storage = Storage::make(pool().allocate(nbytes), nbytes);
  Tensor out = from_blob(storage->data(), t.sizes(), contiguous_strides(t.sizes()), t.dtype(),
                         [storage](void*) mutable { storage.reset(); });
  return out.copy_(t);
}

bool is_pinned(const Tensor& t) { return t.device().is_cpu() && is_pinned_pointer(t.data_ptr()); }

bool is_pinned_pointer(const void* ptr) {
  if (ptr == nullptr || !is_available()) return false;
  if (pool().contains(ptr)) return true;
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

void record_pinned_use(const void* ptr, const Stream& stream) { pool().record_use(ptr, stream); }

void empty_pinned_cache() { pool().empty_cache(); }

}  // namespace trainrun::cuda
