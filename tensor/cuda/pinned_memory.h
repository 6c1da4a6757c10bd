#pragma once
// Page-locked ("pinned") host memory: the only CPU memory a GPU copy can read
// or write asynchronously, and the fastest for copies either way. Blocks are
// cached by power-of-two size; a block freed while a copy queued on a stream
// may still use it is reused only after that copy has finished.
#include <cstddef>

#include "tensor/cuda/stream.h"
#include "tensor/tensor.h"

namespace trainrun::cuda {

// A copy of CPU tensor `t` in pinned memory (t itself when already pinned).
Tensor pin_memory(const Tensor& t);
// True when t's memory is pinned host memory.
bool is_pinned(const Tensor& t);
bool is_pinned_pointer(const void* ptr);
// Marks the pinned block holding ptr as used by work queued on `stream`.
void record_pinned_use(const void* ptr, const Stream& stream);
// Returns the cached free pinned blocks whose copies are done.
void empty_pinned_cache();

}  // namespace trainrun::cuda
