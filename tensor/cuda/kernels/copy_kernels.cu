// The CUDA kernel of copy_ between dtypes and layouts (fill_ uses it too,
// from a scalar operand).
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {
namespace {

// The loop converts: S's value in its math type, stored as D.
template <typename D, typename S>
struct CopyFn : ElementTypes<D, S> {
  __device__ opmath<S> operator()(opmath<S> v) const { return v; }
};

}  // namespace

int launch_copy(DType dst, DType src, const ElementwiseArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dst, [&](auto dst_tag) -> int {
    using D = decltype(dst_tag);
    return visit_cuda_dtype(src, [&](auto src_tag) -> int {
      using S = decltype(src_tag);
      // A copy within a 16-bit float dtype moves bits (NaN payloads too).
      if constexpr (std::is_same<D, S>::value && is_reduced_float<D>)
        return launch_elementwise(args, stream, CopyFn<uint16_t, uint16_t>{});
      else
        return launch_elementwise(args, stream, CopyFn<D, S>{});
    });
  });
}

}  // namespace trainrun::cuda
