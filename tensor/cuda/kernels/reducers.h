#pragma once
// The reducers of the row reductions (reduce_kernels.cu): the state each
// keeps, how a value accumulates into it, how two states combine, and how
// the final state becomes the output. The kernels (reduce_loop.cuh) only
// decide which states meet in which order. Host-and-device, so CPU tests fold
// rows in the GPU's exact order (kernel_elements_test.cc). The semantics
// mirror tensor/cpu/reduce_kernels.cc: NaN wins max/min, the first index
// wins ties.
#include <cmath>
#include <limits>

#include "tensor/cuda/kernels/element_access.h"

namespace trainrun::cuda {

// The kernels' schedule, which fixes the order states meet in: rows of up to
// kWarpRowMax elements go to one warp; longer ones to blocks of
// kReduceThreads, each block taking a chunk of at least kSplitChunk elements.
constexpr int kReduceThreads = 256;
constexpr int64_t kWarpRowMax = 1024;
constexpr int64_t kSplitChunk = 16384;
constexpr int64_t kMaxReduceStateBytes = 32;  // the largest reducer state (Welford's is 24)

// Sums of integers and bools accumulate (and return) in int64, as in PyTorch.
template <typename T>
using sum_acc = std::conditional_t<is_floating_cuda<T>(), opmath<T>, int64_t>;
template <typename T>
using sum_out = std::conditional_t<is_floating_cuda<T>(), T, int64_t>;

template <typename T, bool is_prod>
struct SumReducer {
  using Acc = sum_acc<T>;
  sum_out<T>* out;
  double scale;
  TR_HOST_DEVICE Acc init() const { return Acc(is_prod ? 1 : 0); }
  TR_HOST_DEVICE Acc accumulate(Acc s, opmath<T> v, int64_t) const { return is_prod ? s * Acc(v) : s + Acc(v); }
  TR_HOST_DEVICE Acc combine(Acc a, Acc b) const { return is_prod ? a * b : a + b; }
  TR_HOST_DEVICE void finish(Acc s, int64_t row) const {
    if constexpr (is_floating_cuda<T>()) {
      out[row] = convert<sum_out<T>>(scale == 1.0 ? s : static_cast<Acc>(s * scale));
    } else {
      out[row] = s;
    }
  }
};

template <typename Acc>
struct alignas(8) ValueIndex {
  Acc v;
  int64_t i;
};

// max/min (with the index of the winner), argmax/argmin: NaN wins, then the
// larger (smaller) value, then the smaller index.
template <typename T, bool is_max>
struct ExtremeReducer {
  using Acc = opmath<T>;
  using S = ValueIndex<Acc>;
  T* values;          // amax/amin, max.dim/min.dim
  int64_t* indices;   // max.dim/min.dim, argmax/argmin
  TR_HOST_DEVICE S init() const { return S{Acc(0), -1}; }
  TR_HOST_DEVICE static bool is_nan(Acc v) {
    if constexpr (std::is_floating_point<Acc>::value) return v != v;
    else return false;
  }
  TR_HOST_DEVICE S combine(S a, S b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) {
      if (an && bn) return a.i < b.i ? a : b;
      return an ? a : b;
    }
    if (is_max ? a.v > b.v : a.v < b.v) return a;
    if (is_max ? b.v > a.v : b.v < a.v) return b;
    return a.i < b.i ? a : b;
  }
  TR_HOST_DEVICE S accumulate(S s, Acc v, int64_t i) const { return combine(s, S{v, i}); }
  TR_HOST_DEVICE void finish(S s, int64_t row) const {
    if (values != nullptr) values[row] = convert<T>(s.v);
    if (indices != nullptr) indices[row] = s.i;
  }
};

template <typename T, bool is_all>
struct AllReducer {
  bool* out;
  TR_HOST_DEVICE int init() const { return is_all ? 1 : 0; }
  TR_HOST_DEVICE int accumulate(int s, opmath<T> v, int64_t) const {
    const int nz = v != opmath<T>(0) ? 1 : 0;
    return is_all ? (s & nz) : (s | nz);
  }
  TR_HOST_DEVICE int combine(int a, int b) const { return is_all ? (a & b) : (a | b); }
  TR_HOST_DEVICE void finish(int s, int64_t row) const { out[row] = s != 0; }
};

template <typename T, ReduceKind kind>
struct NormReducer {
  using Acc = opmath<T>;
  T* out;
  Acc p;
  TR_HOST_DEVICE Acc init() const {
    if constexpr (kind == ReduceKind::NormNegInf) return std::numeric_limits<Acc>::infinity();
    else return Acc(0);
  }
  TR_HOST_DEVICE Acc accumulate(Acc s, Acc v, int64_t) const {
    const Acc a = std::abs(v);
    if constexpr (kind == ReduceKind::Norm0) return s + (a != Acc(0) ? Acc(1) : Acc(0));
    else if constexpr (kind == ReduceKind::Norm1) return s + a;
    else if constexpr (kind == ReduceKind::Norm2) return s + a * a;
    else if constexpr (kind == ReduceKind::NormP) return s + std::pow(a, p);
    else return combine(s, a);
  }
  TR_HOST_DEVICE Acc combine(Acc a, Acc b) const {
    if constexpr (kind == ReduceKind::NormInf || kind == ReduceKind::NormNegInf) {
      if (a != a || b != b) return a != a ? a : b;
      return kind == ReduceKind::NormInf ? (a > b ? a : b) : (a < b ? a : b);
    } else {
      return a + b;
    }
  }
  TR_HOST_DEVICE void finish(Acc s, int64_t row) const {
    if constexpr (kind == ReduceKind::Norm2) s = std::sqrt(s);
    else if constexpr (kind == ReduceKind::NormP) s = std::pow(s, Acc(1) / p);
    out[row] = convert<T>(s);
  }
};

// Welford's running mean and squared deviations, merged with Chan's formula;
// in double, like the CPU's two-pass variance.
struct Welford {
  double n, mean, m2;
};

template <typename T>
struct VarReducer {
  T* out;
  int64_t correction;
  TR_HOST_DEVICE Welford init() const { return Welford{0, 0, 0}; }
  TR_HOST_DEVICE Welford accumulate(Welford s, opmath<T> v, int64_t) const {
    s.n += 1;
    const double d = static_cast<double>(v) - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (static_cast<double>(v) - s.mean);
    return s;
  }
  TR_HOST_DEVICE Welford combine(Welford a, Welford b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const double n = a.n + b.n, d = b.mean - a.mean;
    return Welford{n, a.mean + d * b.n / n, a.m2 + b.m2 + d * d * a.n * b.n / n};
  }
  TR_HOST_DEVICE void finish(Welford s, int64_t row) const {
    const double denom = s.n - static_cast<double>(correction);
    out[row] = convert<T>(denom <= 0 ? std::numeric_limits<double>::quiet_NaN() : s.m2 / denom);
  }
};

// Online logsumexp: the running max and the sum of exp(x - max).
template <typename T>
struct LogSumExpReducer {
  using Acc = opmath<T>;
  struct S {
    Acc max, sum;
  };
  T* out;
  TR_HOST_DEVICE S init() const { return S{-std::numeric_limits<Acc>::infinity(), Acc(0)}; }
  TR_HOST_DEVICE S accumulate(S s, Acc v, int64_t) const { return combine(s, S{v, Acc(1)}); }
  TR_HOST_DEVICE S combine(S a, S b) const {
    if (b.max == -std::numeric_limits<Acc>::infinity()) return a;  // b adds exp(-inf) = 0
    if (a.max == -std::numeric_limits<Acc>::infinity()) return b;
    if (a.max != a.max || b.max != b.max) return S{a.max + b.max, Acc(1)};  // NaN
    if (a.max < b.max) { S t = a; a = b; b = t; }
    return S{a.max, a.sum + b.sum * std::exp(b.max - a.max)};
  }
  TR_HOST_DEVICE void finish(S s, int64_t row) const {
    const Acc inf = std::numeric_limits<Acc>::infinity();
    out[row] = convert<T>(s.max == inf || s.max == -inf || s.max != s.max ? s.max : s.max + std::log(s.sum));
  }
};

}  // namespace trainrun::cuda
