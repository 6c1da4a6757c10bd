#pragma once
// float32 transcendental functions over arrays (y may alias x), on SLEEF's
// AVX2 kernels (1.0-ulp variants).
#include <cstdint>

namespace trainrun {
namespace vec {

void exp(const float* x, float* y, int64_t n);
void log(const float* x, float* y, int64_t n);
void log1p(const float* x, float* y, int64_t n);
void tanh(const float* x, float* y, int64_t n);
void erf(const float* x, float* y, int64_t n);
void sin(const float* x, float* y, int64_t n);
void cos(const float* x, float* y, int64_t n);
// GELU's erf: Abramowitz and Stegun 7.1.26 (absolute error under 1.5e-7),
// the approximation PyTorch's GELU kernels compute; 3-4x faster than erf's
// 1-ulp kernel, which torch.erf keeps.
void erf_gelu(const float* x, float* y, int64_t n);
// out = g * gelu'(x) for GELU's erf form, with erf_gelu's erf (out may alias g or x).
void gelu_backward(const float* g, const float* x, float* out, int64_t n);
// Box-Muller over a block of 16 uniforms in [0, 1), as PyTorch's AVX2 normal_ computes it: with u1 = 1 - u[j]
// and u2 = u[j + 8] (j < 8), r = sqrt(-2 log u1) and t = 2 pi u2 give out[j] = r cos t * std + mean and
// out[j + 8] = r sin t * std + mean (out may alias u).
void box_muller16(const float* u, float mean, float std, float* out);
// The largest of x[0..n) (-inf when n is 0); NaN when any is NaN.
float max(const float* x, int64_t n);
// y = exp(x - shift), returning the sum of y (softmax's inner loop).
float exp_shifted_sum(const float* x, float* y, float shift, int64_t n);

}  // namespace vec
}  // namespace trainrun
