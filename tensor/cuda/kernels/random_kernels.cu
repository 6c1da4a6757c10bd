// Random fills on the GPU with the CPU's Philox stream (tensor/random_draw.h),
// so a seed gives the same values on either device.
#include "tensor/cuda/kernels/elementwise_loop.cuh"
#include "tensor/cuda/kernels/random_args.h"
#include "tensor/random_draw.h"

namespace trainrun::cuda {
namespace {

template <typename T>
__global__ void random_fill_kernel(T* out, int64_t n, RandomDistribution dist, bool two_words, double a, double b,
                                   uint64_t key, uint64_t first) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = random_value(dist, two_words, a, b, key, first, i);
    if constexpr (std::is_same<T, bool>::value) out[i] = v != 0;
    else out[i] = convert<T>(static_cast<opmath<T>>(v));
  }
}

}  // namespace

int launch_random_fill(DType dt, void* out, int64_t n, int64_t distribution, double a, double b, uint64_t key,
                       uint64_t first, CUstream_st* stream) {
  if (n == 0) return 0;
  const auto dist = static_cast<RandomDistribution>(distribution);
  int64_t blocks = (n + 255) / 256;
  if (blocks > int64_t(1) << 20) blocks = int64_t(1) << 20;
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    const bool two_words = random_uses_two_words(dist, std::is_same<T, double>::value, a, b);
    random_fill_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(static_cast<T*>(out), n, dist, two_words,
                                                                             a, b, key, first);
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace trainrun::cuda
