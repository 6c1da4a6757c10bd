#pragma once
// The caching allocator of each GPU (caching_allocator.h), registered as the
// allocator of CUDA tensors: memory comes from the current stream's pool of
// the tensor's device. PyTorch's torch.cuda.memory_* functions map onto these.
#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/stream.h"
#include "tensor/tensor.h"

namespace trainrun::cuda {

// The caching allocator of `device` (-1: the current device).
CachingAllocator& caching_allocator(int device = -1);
MemoryStats memory_stats(int device = -1);
void reset_peak_memory_stats(int device = -1);
// Returns the cached memory of every device this process has used.
void empty_cache();
// Tensor.record_stream: `t`'s memory is in use on `stream` too, so its reuse
// after `t` dies waits for the work queued on `stream` until then.
void record_stream(const Tensor& t, const Stream& stream);

}  // namespace trainrun::cuda
