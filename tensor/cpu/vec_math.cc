#include "tensor/cpu/vec_math.h"

#include <cmath>

#include "tensor/cpu/avx2/vec_math_avx2.h"

namespace trainrun {
namespace vec {
namespace {

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

template <typename F>
void scalar(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

}  // namespace

#define TR_VEC_FN(name)                                                   \
  void name(const float* x, float* y, int64_t n) {                        \
    if (has_avx2()) return avx2::name(x, y, n);                           \
    scalar(x, y, n, [](float v) { return std::name(v); });                \
  }
TR_VEC_FN(exp)
TR_VEC_FN(log)
TR_VEC_FN(log1p)
TR_VEC_FN(tanh)
TR_VEC_FN(erf)
TR_VEC_FN(sin)
TR_VEC_FN(cos)
#undef TR_VEC_FN

float exp_shifted_sum(const float* x, float* y, float shift, int64_t n) {
  if (has_avx2()) return avx2::exp_shifted_sum(x, y, shift, n);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) { y[i] = std::exp(x[i] - shift); sum += y[i]; }
  return sum;
}

}  // namespace vec
}  // namespace trainrun
