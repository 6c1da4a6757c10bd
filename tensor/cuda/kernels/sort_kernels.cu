// Row-wise stable sorting on the GPU with CUB's segmented sort (one segment
// per row), carrying the original positions as values.
#include <cub/device/device_segmented_sort.cuh>

#include "tensor/cuda/kernels/elementwise_loop.cuh"
#include "tensor/cuda/kernels/sort_conv_args.h"

namespace trainrun::cuda {

int launch_sort_rows(DType dt, bool descending, const void* keys_in, void* keys_out, const int64_t* values_in,
                     int64_t* values_out, int64_t rows, int64_t n, const int* offsets, void* temp, size_t* temp_bytes,
                     CUstream_st* stream) {
  if (rows * n > INT32_MAX || rows > INT32_MAX) return static_cast<int>(cudaErrorInvalidValue);
  const int items = static_cast<int>(rows * n), segments = static_cast<int>(rows);
  // Keys come as int32, int64, float32 or float64 (the host widens the
  // others first): four instantiations compile far faster than nine.
  if (dt != DType::Int32 && dt != DType::Int64 && dt != DType::Float32 && dt != DType::Float64)
    return static_cast<int>(cudaErrorInvalidValue);
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    constexpr bool key_type = std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value ||
                              std::is_same<T, float>::value || std::is_same<T, double>::value;
    if constexpr (!key_type) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      const T* kin = static_cast<const T*>(keys_in);
      T* kout = static_cast<T*>(keys_out);
      cudaError_t err;
      if (descending)
        err = cub::DeviceSegmentedSort::StableSortPairsDescending(temp, *temp_bytes, kin, kout, values_in, values_out,
                                                                  items, segments, offsets, offsets + 1, stream);
      else
        err = cub::DeviceSegmentedSort::StableSortPairs(temp, *temp_bytes, kin, kout, values_in, values_out, items,
                                                        segments, offsets, offsets + 1, stream);
      return static_cast<int>(err);
    }
  });
}

}  // namespace trainrun::cuda
