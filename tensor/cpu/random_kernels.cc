// The CPU kernel of random_fill_ (uniform_, normal_, bernoulli_, randint):
// tensor/random_draw.h's value per element, split across threads.
#include <algorithm>

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
    const int64_t lanes = two_words ? 2 : 4;
    parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end;) {  // one Philox block per `lanes` elements
        const int64_t block = i / lanes, stop = std::min(end, (block + 1) * lanes);
        const PhiloxBlock words = philox_block(key, 0, first + static_cast<uint64_t>(block));
        for (; i < stop; ++i) {
          uint32_t w0, w1;
          random_words(words, two_words, i, w0, w1);
          const double v = random_value_of_words(dist, two_words, a, b, w0, w1);
          if constexpr (std::is_same<T, bool>::value) p[i] = v != 0;
          else p[i] = static_cast<T>(static_cast<Acc>(v));
        }
      }
    });
  });
  target.impl()->bump_version();
}

OpKernel<ops::random_fill_> reg_random_fill(DispatchKey::CPU, &random_fill_cpu);

}  // namespace
}  // namespace trainrun
