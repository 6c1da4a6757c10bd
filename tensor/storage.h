#pragma once
// Raw memory behind tensors. A DataPtr carries its own deleter, so memory
// from NumPy, DLPack, shared memory or CUDA IPC is wrapped without a copy and
// released by whoever owns it.
#include <cstddef>
#include <functional>
#include <memory>

#include "tensor/device.h"
#include "tensor/intrusive_ptr.h"

namespace trainrun {

class SharedSegment;  // tensor/shared_memory.h

class DataPtr {
 public:
  using Deleter = std::function<void(void*)>;
  DataPtr() = default;
  DataPtr(void* data, Deleter deleter, Device device)
      : data_(data), deleter_(std::move(deleter)), device_(device) {}
  DataPtr(DataPtr&& o) noexcept { *this = std::move(o); }
  DataPtr& operator=(DataPtr&& o) noexcept {
    release_now();
    data_ = o.data_; deleter_ = std::move(o.deleter_); device_ = o.device_;
    o.data_ = nullptr; o.deleter_ = nullptr;
    return *this;
  }
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() { release_now(); }
  void* get() const { return data_; }
  Device device() const { return device_; }

 private:
  void release_now() { if (deleter_) deleter_(data_); deleter_ = nullptr; data_ = nullptr; }
  void* data_ = nullptr;
  Deleter deleter_;
  Device device_;
};

// Hands out device memory. The CPU allocator lives in allocator.h; the CUDA
// caching allocator implements the same interface.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr allocate(size_t nbytes) = 0;
  // Memory on `device` (index -1: the current device of its type); allocators
  // of one device ignore it.
  virtual DataPtr allocate(size_t nbytes, Device device) { (void)device; return allocate(nbytes); }
};

// Whether this thread is in inference mode (torch.inference_mode; set by autograd's InferenceMode): memory
// allocated then belongs to inference tensors, as PyTorch marks them.
bool allocating_inference_tensors();
void set_allocating_inference_tensors(bool on);

// A refcounted block of memory shared by every view of it.
class StorageImpl : public RefCounted {
 public:
  StorageImpl(DataPtr data, size_t nbytes)
      : data_(std::move(data)), nbytes_(nbytes), inference_(allocating_inference_tensors()) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }
  // Gives the storage nbytes of fresh memory from its device's allocator,
  // keeping the first min(old, new) bytes; 0 frees it. Every tensor on the
  // storage sees the new memory (FSDP frees gathered parameters after
  // forward and refills the same storage before backward).
  void resize(size_t nbytes);

  // Shared memory (share_memory_(), a tensor from another process): the
  // segment the bytes live in and where in it; null for private memory.
  const std::shared_ptr<SharedSegment>& shared_segment() const { return shared_segment_; }
  size_t shared_offset() const { return shared_offset_; }
  // Replaces the memory (same size) with a block of a shared segment.
  void set_shared(DataPtr data, std::shared_ptr<SharedSegment> segment, size_t offset);
  // Allocated in inference mode: every tensor on it is an inference tensor (Tensor.is_inference(); a view
  // of one is one too, and a view made in inference mode of a normal tensor is normal, as in PyTorch).
  bool is_inference() const { return inference_; }

 private:
  DataPtr data_;
  size_t nbytes_;
  bool inference_;
  std::shared_ptr<SharedSegment> shared_segment_;
  size_t shared_offset_ = 0;
};
using Storage = intrusive_ptr<StorageImpl>;

}  // namespace trainrun
