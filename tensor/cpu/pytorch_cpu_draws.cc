#include "tensor/cpu/pytorch_cpu_draws.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "base/error.h"
#include "tensor/cpu/vec_math.h"
#include "tensor/dtype_visit.h"
#include "tensor/half.h"

namespace trainrun {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Bits of mantissa PyTorch's uniform draws keep per dtype (std::numeric_limits<T>::digits).
template <typename T>
constexpr int uniform_digits() {
  if constexpr (std::is_same_v<T, Half>) return 11;
  else if constexpr (std::is_same_v<T, BFloat16>) return 8;
  else return 24;
}

// PyTorch's uniform_real_distribution<T>(from, to): float-width dtypes from one 32-bit output, computed in
// float (their accumulate type); double from a 64-bit draw.
template <typename T>
double uniform(MersenneTwister& engine, double from, double to) {
  if constexpr (std::is_same_v<T, double>) {
    const double x = static_cast<double>(engine.random64() & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
    return x * (to - from) + from;
  } else {
    constexpr int digits = uniform_digits<T>();
    const float x = static_cast<float>(engine.random() & ((1u << digits) - 1)) / static_cast<float>(1u << digits);
    const float lo = static_cast<float>(static_cast<T>(static_cast<float>(from)));
    const float hi = static_cast<float>(static_cast<T>(static_cast<float>(to)));
    return static_cast<double>(x * (hi - lo) + lo);
  }
}

// PyTorch's serial normal_distribution<double>: a Box-Muller pair from two 53-bit uniforms, the second value
// kept in the engine for the next draw.
double serial_normal(MersenneTwister& engine, double mean, double std) {
  double z;
  if (engine.next_double_normal) {
    z = *engine.next_double_normal;
    engine.next_double_normal.reset();
  } else {
    const double u1 = uniform<double>(engine, 0.0, 1.0);
    const double u2 = uniform<double>(engine, 0.0, 1.0);
    const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
    const double theta = kTwoPi * u1;
    engine.next_double_normal = r * std::sin(theta);
    z = r * std::cos(theta);
  }
  return z * std + mean;
}

template <typename T>
void store(void* out, int64_t k, double v) {
  T* p = static_cast<T*>(out);
  if constexpr (std::is_same_v<T, bool>) p[k] = v != 0;
  else p[k] = static_cast<T>(static_cast<opmath_t<T>>(v));
}

// Calls emit(i, value) for every element i of the whole draw, in the engine's order.
template <typename T, typename Emit>
void draw_sequence(MersenneTwister& engine, const DrawRequest& r, Emit&& emit) {
  const int64_t n = r.total;
  switch (r.dist) {
    case RandomDistribution::Uniform:
      for (int64_t i = 0; i < n; ++i) emit(i, uniform<T>(engine, r.a, r.b));
      return;
    case RandomDistribution::Bernoulli:
      for (int64_t i = 0; i < n; ++i) emit(i, uniform<double>(engine, 0.0, 1.0) < r.a ? 1.0 : 0.0);
      return;
    case RandomDistribution::RandInt: {
      const auto range = static_cast<uint64_t>(r.b - r.a);
      const auto low = static_cast<int64_t>(r.a);
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t word = range >= (uint64_t{1} << 32) ? engine.random64() : engine.random();
        emit(i, static_cast<double>(low + static_cast<int64_t>(word % range)));
      }
      return;
    }
    case RandomDistribution::Normal:
      break;
  }
  if (n < 16 || !r.contiguous) {
    for (int64_t i = 0; i < n; ++i) emit(i, serial_normal(engine, r.a, r.b));
    return;
  }
  // The block path: every element's uniform first (drawn block by block here: the same order), Box-Muller
  // over each block of 16, then the last 16 again from fresh uniforms when 16 does not divide n.
  auto block = [&](int64_t start) {
    if constexpr (std::is_same_v<T, float>) {  // PyTorch's AVX2 path: float arithmetic, eight lanes
      float u[16];
      for (float& x : u) x = static_cast<float>(uniform<T>(engine, 0.0, 1.0));
      vec::box_muller16(u, static_cast<float>(r.a), static_cast<float>(r.b), u);
      for (int j = 0; j < 16; ++j) emit(start + j, u[j]);
    } else {
      double u[16];
      for (double& x : u) x = uniform<T>(engine, 0.0, 1.0);
      for (int j = 0; j < 8; ++j) {
        const double radius = std::sqrt(-2.0 * std::log(1.0 - u[j]));
        const double theta = kTwoPi * u[j + 8];
        emit(start + j, radius * std::cos(theta) * r.b + r.a);
        emit(start + j + 8, radius * std::sin(theta) * r.b + r.a);
      }
    }
  };
  const int64_t whole_blocks = n / 16;
  for (int64_t k = 0; k < whole_blocks; ++k) block(16 * k);
  if (n % 16 != 0) {
    for (int64_t i = 16 * whole_blocks; i < n; ++i) (void)uniform<T>(engine, 0.0, 1.0);  // drawn, then redrawn
    block(n - 16);
  }
}

}  // namespace

void draw_pytorch_cpu(MersenneTwister& engine, const DrawRequest& request, int64_t lo, int64_t hi, void* out) {
  TR_CHECK(0 <= lo && lo <= hi && hi <= request.total, ValueError, "random draw: elements [{}, {}) of a draw of {}",
           lo, hi, request.total);
  TR_CHECK(request.dist != RandomDistribution::RandInt || request.b > request.a, ValueError,
           "random_: expects from < to, got from={} to={}", request.a, request.b);
  visit_dtype(request.dtype, "random draw", [&](auto tag) {
    using T = decltype(tag);
    // The arithmetic dtype of the draw: floating dtypes draw as themselves, others (bernoulli, randint) as float.
    using Drawn = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                         std::is_same_v<T, BFloat16>, T, float>;
    draw_sequence<Drawn>(engine, request, [&](int64_t i, double v) {
      if (i >= lo && i < hi) store<T>(out, i - lo, v);
    });
  });
}

void permutation_pytorch_cpu(MersenneTwister& engine, int64_t n, int64_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = i;
  for (int64_t i = 0; i + 1 < n; ++i) {
    const auto z = static_cast<int64_t>(engine.random() % static_cast<uint64_t>(n - i));
    std::swap(out[i], out[i + z]);
  }
}

}  // namespace trainrun
