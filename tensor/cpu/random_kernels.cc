// The CPU kernel of random_fill_ (uniform_, normal_, bernoulli_, randint): PyTorch's CPU draws from the
// Mersenne Twister of the generator the factories name (tensor/cpu/pytorch_cpu_draws.h), in order, on one
// thread, as PyTorch's. The Philox (key, first) arguments are for devices with counter-based draws.
#include "tensor/cpu/pytorch_cpu_draws.h"
#include "tensor/dispatcher.h"
#include "tensor/generator.h"
#include "tensor/op_schemas.h"
#include "tensor/tensor.h"

namespace trainrun {
namespace {

void random_fill_cpu(Tensor& target, int64_t dist_int, double a, double b, uint64_t /*key*/, uint64_t /*first*/) {
  DrawRequest request;
  request.dist = static_cast<RandomDistribution>(dist_int);
  request.a = a;
  request.b = b;
  request.dtype = target.dtype();
  request.total = target.numel();
  request.contiguous = CpuDrawScope::contiguous();
  TR_CHECK(target.is_contiguous(), ValueError, "random_fill_: the CPU kernel fills contiguous tensors");
  Generator& gen = CpuDrawScope::generator();
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    draw_pytorch_cpu(gen.cpu_engine(), request, 0, request.total, target.data_ptr());
  }
  target.impl()->bump_version();
}

OpKernel<ops::random_fill_> reg_random_fill(DispatchKey::CPU, &random_fill_cpu);

}  // namespace
}  // namespace trainrun
