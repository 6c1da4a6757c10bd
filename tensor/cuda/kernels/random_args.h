#pragma once
// The random fill kernel (random_kernels.cu): tensor/random_draw.h's value
// for each of n contiguous elements of dtype dt.
#include <cstdint>

#include "tensor/cuda/kernels/kernel_args.h"

namespace trainrun::cuda {

int launch_random_fill(DType dt, void* out, int64_t n, int64_t distribution, double a, double b, uint64_t key,
                       uint64_t first, CUstream_st* stream);

}  // namespace trainrun::cuda
