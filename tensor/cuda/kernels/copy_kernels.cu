// The CUDA kernel of copy_ between dtypes and layouts (fill_ uses it too,
// from a scalar operand).
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {
namespace {

template <typename D, typename S>
struct CopyFn {
  __device__ void operator()(char** p) const {
    *reinterpret_cast<D*>(p[0]) = convert<D>(*reinterpret_cast<const S*>(p[1]));
  }
};

}  // namespace

int launch_copy(DType dst, DType src, const ElementwiseArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dst, [&](auto dst_tag) -> int {
    using D = decltype(dst_tag);
    return visit_cuda_dtype(src, [&](auto src_tag) -> int {
      using S = decltype(src_tag);
      return launch_elementwise<2>(args, stream, CopyFn<D, S>{});
    });
  });
}

}  // namespace trainrun::cuda
