#pragma once
// The CPU allocator: 64-byte aligned blocks, so vector loads never straddle
// cache lines at the start of a tensor.
#include "tensor/storage.h"

namespace trainrun {

Allocator* cpu_allocator();
// Allocator for a device (CPU now; the CUDA allocator registers itself).
Allocator* allocator_for(Device device);
void register_allocator(DeviceType type, Allocator* allocator);

}  // namespace trainrun
