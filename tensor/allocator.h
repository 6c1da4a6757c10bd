#pragma once
// The CPU allocator: 64-byte aligned blocks, so vector loads never straddle
// cache lines at the start of a tensor; blocks of 128 KiB and more are cached
// for reuse (see allocator.cc).
#include "tensor/storage.h"

namespace trainrun {

Allocator* cpu_allocator();
// Returns the CPU allocator's cached free blocks (of 128 KiB and more) to the
// system, like torch.cuda.empty_cache() does for GPU memory.
void cpu_empty_cache();
// Bytes held by live CPU tensors (cached free blocks excluded) now and at
// their peak since the last reset: what a memory test of FSDP's resharding or
// activation checkpointing measures (torch.cuda.memory_allocated's meaning).
struct CpuMemoryStats {
  size_t allocated_bytes = 0;
  size_t peak_allocated_bytes = 0;
  size_t cached_bytes = 0;  // freed blocks kept for reuse (allocator.cc), which cpu_empty_cache() gives back
};
CpuMemoryStats cpu_memory_stats();
void cpu_reset_peak_memory_stats();
// Allocator for a device (CPU now; the CUDA allocator registers itself).
Allocator* allocator_for(Device device);
void register_allocator(DeviceType type, Allocator* allocator);

}  // namespace trainrun
