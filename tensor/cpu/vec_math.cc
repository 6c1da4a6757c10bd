// SLEEF's AVX2 kernels; the tensor core's baseline is AVX2 + FMA
// (tensor/BUILD, cpu_check).
#include "tensor/cpu/vec_math.h"

#include <immintrin.h>
#include <sleef.h>

#include <cmath>
#include <limits>

namespace trainrun {
namespace vec {
namespace {

template <auto VF>
inline void apply(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, VF(_mm256_loadu_ps(x + i)));
  if (i < n) {  // tail through a padded vector, so results match the body's
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = i; j < n; ++j) buf[j - i] = x[j];
    _mm256_store_ps(buf, VF(_mm256_load_ps(buf)));
    for (int64_t j = i; j < n; ++j) y[j] = buf[j - i];
  }
}

// erf(x) = sign(x) (1 - t (p1 + t (p2 + t (p3 + t (p4 + t p5)))) exp(-x^2)), t = 1 / (1 + p |x|).
inline __m256 erf_as(__m256 x) {
  const __m256 sign = _mm256_and_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 a = _mm256_xor_ps(sign, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one));
  __m256 r = _mm256_fmadd_ps(_mm256_set1_ps(1.061405429f), t, _mm256_set1_ps(-1.453152027f));
  r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(1.421413741f));
  r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(-0.284496736f));
  r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(0.254829592f));
  const __m256 e = Sleef_expf8_u10avx2(_mm256_xor_ps(_mm256_set1_ps(-0.0f), _mm256_mul_ps(x, x)));
  return _mm256_xor_ps(sign, _mm256_fnmadd_ps(_mm256_mul_ps(e, t), r, one));
}

}  // namespace

void erf_gelu(const float* x, float* y, int64_t n) { apply<erf_as>(x, y, n); }

namespace {
// g (Phi(x) + x phi(x)): Phi from GELU's erf, phi = exp(-x^2 / 2) / sqrt(2 pi).
inline __m256 gelu_backward_as(__m256 g, __m256 x) {
  const __m256 cdf = _mm256_mul_ps(_mm256_set1_ps(0.5f),
                                   _mm256_add_ps(_mm256_set1_ps(1.0f),
                                                 erf_as(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)))));
  const __m256 pdf = _mm256_mul_ps(
      Sleef_expf8_u10avx2(_mm256_mul_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(-0.5f))),
      _mm256_set1_ps(0.39894228040143268f));
  return _mm256_mul_ps(g, _mm256_fmadd_ps(x, pdf, cdf));
}
}  // namespace

void gelu_backward(const float* g, const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, gelu_backward_as(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i)));
  if (i < n) {  // the tail through a zero-padded lane buffer
    alignas(32) float gb[8] = {0, 0, 0, 0, 0, 0, 0, 0}, xb[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = i; j < n; ++j) gb[j - i] = g[j], xb[j - i] = x[j];
    _mm256_store_ps(gb, gelu_backward_as(_mm256_load_ps(gb), _mm256_load_ps(xb)));
    for (int64_t j = i; j < n; ++j) out[j] = gb[j - i];
  }
}
void exp(const float* x, float* y, int64_t n) { apply<Sleef_expf8_u10avx2> (x, y, n); }
void log(const float* x, float* y, int64_t n) { apply<Sleef_logf8_u10avx2> (x, y, n); }
void log1p(const float* x, float* y, int64_t n) { apply<Sleef_log1pf8_u10avx2> (x, y, n); }
void tanh(const float* x, float* y, int64_t n) { apply<Sleef_tanhf8_u10avx2> (x, y, n); }
void erf(const float* x, float* y, int64_t n) { apply<Sleef_erff8_u10avx2> (x, y, n); }
void sin(const float* x, float* y, int64_t n) { apply<Sleef_sinf8_u10avx2> (x, y, n); }
void cos(const float* x, float* y, int64_t n) { apply<Sleef_cosf8_u10avx2> (x, y, n); }

void box_muller16(const float* u, float mean, float std, float* out) {
  const __m256 u1 = _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_loadu_ps(u));
  const __m256 u2 = _mm256_loadu_ps(u + 8);
  const __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), Sleef_logf8_u10avx2(u1)));
  const Sleef___m256_2 sin_cos = Sleef_sincosf8_u10avx2(_mm256_mul_ps(_mm256_set1_ps(6.2831853071795864f), u2));
  const __m256 m = _mm256_set1_ps(mean), s = _mm256_set1_ps(std);
  _mm256_storeu_ps(out, _mm256_fmadd_ps(_mm256_mul_ps(radius, sin_cos.y), s, m));
  _mm256_storeu_ps(out + 8, _mm256_fmadd_ps(_mm256_mul_ps(radius, sin_cos.x), s, m));
}

float max(const float* x, int64_t n) {
  __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 nan = _mm256_setzero_ps();  // lanes that saw a NaN
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_max_ps(acc, v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float m = lanes[0];
  for (float v : lanes) m = v > m ? v : m;
  bool saw_nan = _mm256_movemask_ps(nan) != 0;
  for (; i < n; ++i) {
    saw_nan = saw_nan || x[i] != x[i];
    m = x[i] > m ? x[i] : m;
  }
  return saw_nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

float exp_shifted_sum(const float* x, float* y, float shift, int64_t n) {
  __m256 vshift = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift));
    _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float sum = 0;
  for (float v : lanes) sum += v;
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - shift);
    sum += y[i];
  }
  return sum;
}

}  // namespace vec
}  // namespace trainrun
