#pragma once
// AVX2 bodies of vec_math.h; only call them when the CPU has AVX2 and FMA.
#include <cstdint>

namespace trainrun {
namespace vec {
namespace avx2 {

void exp(const float* x, float* y, int64_t n);
void log(const float* x, float* y, int64_t n);
void log1p(const float* x, float* y, int64_t n);
void tanh(const float* x, float* y, int64_t n);
void erf(const float* x, float* y, int64_t n);
void sin(const float* x, float* y, int64_t n);
void cos(const float* x, float* y, int64_t n);
float exp_shifted_sum(const float* x, float* y, float shift, int64_t n);

}  // namespace avx2
}  // namespace vec
}  // namespace trainrun
