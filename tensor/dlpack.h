#pragma once
// DLPack: zero-copy exchange with NumPy, PyTorch, JAX... through the C ABI
// structs of dlpack.h (Debian's libdlpack-dev).
#include <dlpack/dlpack.h>

#include "tensor/tensor.h"

namespace trainrun {

// A DLManagedTensor sharing t's memory; its deleter releases the reference
// it holds on t. The consumer must call deleter exactly once.
DLManagedTensor* to_dlpack(const Tensor& t);
// A Tensor over the DLManagedTensor's memory, without copying; the
// producer's deleter runs when the last view of it is gone.
Tensor from_dlpack(DLManagedTensor* managed);

}  // namespace trainrun
