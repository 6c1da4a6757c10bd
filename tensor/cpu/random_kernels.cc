// The CPU kernel of random_fill_ (uniform_, normal_, bernoulli_, randint):
// tensor/random_draw.h's value per element, split across threads.
#include "tensor/dispatcher.h"
#include "tensor/op_schemas.h"
#include "tensor/random_draw.h"
#include "tensor/tensor.h"
#include "tensor/thread_pool.h"

namespace trainrun {
namespace {

void random_fill_cpu(Tensor& target, int64_t dist_int, double a, double b, uint64_t key, uint64_t first) {
  const auto dist = static_cast<RandomDistribution>(dist_int);
  const int64_t n = target.numel();
  visit_dtype(target.dtype(), "random fill", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    T* p = static_cast<T*>(target.data_ptr());
    const bool two_words = random_uses_two_words(dist, std::is_same<T, double>::value, a, b);
    parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const double v = random_value(dist, two_words, a, b, key, first, i);
        if constexpr (std::is_same<T, bool>::value) p[i] = v != 0;
        else p[i] = static_cast<T>(static_cast<Acc>(v));
      }
    });
  });
  target.impl()->bump_version();
}

OpKernel<ops::random_fill_> reg_random_fill(DispatchKey::CPU, &random_fill_cpu);

}  // namespace
}  // namespace trainrun
