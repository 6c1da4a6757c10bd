// random_fill_ on CUDA tensors (uniform_, normal_, bernoulli_, randint,
// dropout's masks): drawn on the GPU with the CPU's Philox stream.
#include "tensor/cuda/elementwise_launch.h"
#include "tensor/cuda/kernels/random_args.h"
#include "tensor/dispatcher.h"
#include "tensor/op_schemas.h"

namespace trainrun::cuda {
namespace {

void random_fill_cuda(Tensor& target, int64_t dist, double a, double b, uint64_t key, uint64_t first) {
  TR_CHECK(target.is_contiguous(), ValueError, "random_fill_: expected a contiguous tensor");
  const int device = target.device().index;
  DeviceGuard guard(device);
  check_launch(launch_random_fill(target.dtype(), target.data_ptr(), target.numel(), dist, a, b, key, first,
                                  current_stream(device).handle()),
               "random fill");
  target.impl()->bump_version();
}

OpKernel<ops::random_fill_> reg_random_fill(DispatchKey::CUDA, &random_fill_cuda);

}  // namespace
}  // namespace trainrun::cuda
