// CUDA reductions over rows (sum, mean, prod, max/min with and without
// indices, argmax/argmin, all/any, norms, var, logsumexp) and cumsum. The
// semantics mirror tensor/cpu/reduce_kernels.cc: NaN wins max/min and the
// first index wins ties.
#include <cuda/std/limits>

#include "tensor/cuda/kernels/reduce_loop.cuh"

namespace trainrun::cuda {

int multiprocessor_count() {
  static int counts[64] = {};
  int device = 0;
  cudaGetDevice(&device);
  if (device < 0 || device >= 64) return 1;
  if (counts[device] == 0) {
    int n = 1;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) n = 1;
    counts[device] = n;
  }
  return counts[device];
}

namespace {

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
  __device__ Acc init() const { return Acc(is_prod ? 1 : 0); }
  __device__ Acc accumulate(Acc s, opmath<T> v, int64_t) const { return is_prod ? s * Acc(v) : s + Acc(v); }
  __device__ Acc combine(Acc a, Acc b) const { return is_prod ? a * b : a + b; }
  __device__ void finish(Acc s, int64_t row) const {
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
  __device__ S init() const { return S{Acc(0), -1}; }
  __device__ static bool is_nan(Acc v) {
    if constexpr (std::is_floating_point<Acc>::value) return v != v;
    else return false;
  }
  __device__ S combine(S a, S b) const {
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
  __device__ S accumulate(S s, Acc v, int64_t i) const { return combine(s, S{v, i}); }
  __device__ void finish(S s, int64_t row) const {
    if (values != nullptr) values[row] = convert<T>(s.v);
    if (indices != nullptr) indices[row] = s.i;
  }
};

template <typename T, bool is_all>
struct AllReducer {
  bool* out;
  __device__ int init() const { return is_all ? 1 : 0; }
  __device__ int accumulate(int s, opmath<T> v, int64_t) const {
    const int nz = v != opmath<T>(0) ? 1 : 0;
    return is_all ? (s & nz) : (s | nz);
  }
  __device__ int combine(int a, int b) const { return is_all ? (a & b) : (a | b); }
  __device__ void finish(int s, int64_t row) const { out[row] = s != 0; }
};

template <typename T, ReduceKind kind>
struct NormReducer {
  using Acc = opmath<T>;
  T* out;
  Acc p;
  __device__ Acc init() const {
    if constexpr (kind == ReduceKind::NormNegInf) return ::cuda::std::numeric_limits<Acc>::infinity();
    else return Acc(0);
  }
  __device__ Acc accumulate(Acc s, Acc v, int64_t) const {
    const Acc a = fabs(v);
    if constexpr (kind == ReduceKind::Norm0) return s + (a != Acc(0) ? Acc(1) : Acc(0));
    else if constexpr (kind == ReduceKind::Norm1) return s + a;
    else if constexpr (kind == ReduceKind::Norm2) return s + a * a;
    else if constexpr (kind == ReduceKind::NormP) return s + pow(a, p);
    else return combine(s, a);
  }
  __device__ Acc combine(Acc a, Acc b) const {
    if constexpr (kind == ReduceKind::NormInf || kind == ReduceKind::NormNegInf) {
      if (a != a || b != b) return a != a ? a : b;
      return kind == ReduceKind::NormInf ? (a > b ? a : b) : (a < b ? a : b);
    } else {
      return a + b;
    }
  }
  __device__ void finish(Acc s, int64_t row) const {
    if constexpr (kind == ReduceKind::Norm2) s = sqrt(s);
    else if constexpr (kind == ReduceKind::NormP) s = pow(s, Acc(1) / p);
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
  __device__ Welford init() const { return Welford{0, 0, 0}; }
  __device__ Welford accumulate(Welford s, opmath<T> v, int64_t) const {
    s.n += 1;
    const double d = static_cast<double>(v) - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (static_cast<double>(v) - s.mean);
    return s;
  }
  __device__ Welford combine(Welford a, Welford b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const double n = a.n + b.n, d = b.mean - a.mean;
    return Welford{n, a.mean + d * b.n / n, a.m2 + b.m2 + d * d * a.n * b.n / n};
  }
  __device__ void finish(Welford s, int64_t row) const {
    const double denom = s.n - static_cast<double>(correction);
    out[row] = convert<T>(denom <= 0 ? ::cuda::std::numeric_limits<double>::quiet_NaN() : s.m2 / denom);
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
  __device__ S init() const { return S{-::cuda::std::numeric_limits<Acc>::infinity(), Acc(0)}; }
  __device__ S accumulate(S s, Acc v, int64_t) const { return combine(s, S{v, Acc(1)}); }
  __device__ S combine(S a, S b) const {
    if (b.max == -::cuda::std::numeric_limits<Acc>::infinity()) return a;  // b adds exp(-inf) = 0
    if (a.max == -::cuda::std::numeric_limits<Acc>::infinity()) return b;
    if (a.max != a.max || b.max != b.max) return S{a.max + b.max, Acc(1)};  // NaN
    if (a.max < b.max) { S t = a; a = b; b = t; }
    return S{a.max, a.sum + b.sum * exp(b.max - a.max)};
  }
  __device__ void finish(S s, int64_t row) const {
    const Acc inf = ::cuda::std::numeric_limits<Acc>::infinity();
    out[row] = convert<T>(s.max == inf || s.max == -inf || s.max != s.max ? s.max : s.max + log(s.sum));
  }
};

template <typename T>
int reduce_typed(ReduceKind kind, const RowReduceArgs& a, CUstream_st* stream) {
  const T* in = static_cast<const T*>(a.in);
  constexpr bool floating = is_floating_cuda<T>();
  // Launches one reducer over the rows.
  auto go = [&](const auto& reducer) { return launch_reducer<T>(reducer, in, a.outer, a.inner, a.scratch, stream); };
  switch (kind) {
    case ReduceKind::Sum: return go(SumReducer<T, false>{static_cast<sum_out<T>*>(a.out), a.scale});
    case ReduceKind::Prod: return go(SumReducer<T, true>{static_cast<sum_out<T>*>(a.out), 1.0});
    case ReduceKind::Max: return go(ExtremeReducer<T, true>{static_cast<T*>(a.out), a.indices});
    case ReduceKind::Min: return go(ExtremeReducer<T, false>{static_cast<T*>(a.out), a.indices});
    case ReduceKind::ArgMax: return go(ExtremeReducer<T, true>{nullptr, static_cast<int64_t*>(a.out)});
    case ReduceKind::ArgMin: return go(ExtremeReducer<T, false>{nullptr, static_cast<int64_t*>(a.out)});
    case ReduceKind::All: return go(AllReducer<T, true>{static_cast<bool*>(a.out)});
    case ReduceKind::Any: return go(AllReducer<T, false>{static_cast<bool*>(a.out)});
    default:
      break;
  }
  if constexpr (floating) {
    T* out = static_cast<T*>(a.out);
    using Acc = opmath<T>;
    switch (kind) {
      case ReduceKind::Norm0: return go(NormReducer<T, ReduceKind::Norm0>{out, Acc(0)});
      case ReduceKind::Norm1: return go(NormReducer<T, ReduceKind::Norm1>{out, Acc(1)});
      case ReduceKind::Norm2: return go(NormReducer<T, ReduceKind::Norm2>{out, Acc(2)});
      case ReduceKind::NormInf: return go(NormReducer<T, ReduceKind::NormInf>{out, Acc(0)});
      case ReduceKind::NormNegInf: return go(NormReducer<T, ReduceKind::NormNegInf>{out, Acc(0)});
      case ReduceKind::NormP: return go(NormReducer<T, ReduceKind::NormP>{out, static_cast<Acc>(a.p)});
      case ReduceKind::Var: return go(VarReducer<T>{out, a.correction});
      case ReduceKind::LogSumExp: return go(LogSumExpReducer<T>{out});
      default: break;
    }
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

// One block per row: a running total carried across chunks of kReduceThreads,
// each chunk scanned with warp shuffles.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads) row_cumsum_kernel(const T* in, T* out, int64_t inner) {
  using Acc = std::conditional_t<is_floating_cuda<T>(), opmath<T>, int64_t>;
  __shared__ Acc warp_totals[kReduceThreads / 32];
  __shared__ Acc carry;
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) carry = Acc(0);
  __syncthreads();
  for (int64_t base = 0; base < inner; base += kReduceThreads) {
    const int64_t i = base + threadIdx.x;
    Acc v = i < inner ? static_cast<Acc>(convert<opmath<T>>(in[row * inner + i])) : Acc(0);
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      Acc up = __shfl_up_sync(0xffffffffu, v, offset);
      if (lane >= offset) v += up;
    }
    if (lane == 31) warp_totals[warp] = v;
    __syncthreads();
    Acc before = carry;
    for (int w = 0; w < warp; ++w) before += warp_totals[w];
    if (i < inner) out[row * inner + i] = convert<T>(before + v);
    __syncthreads();
    if (threadIdx.x == kReduceThreads - 1) carry = before + v;
    __syncthreads();
  }
}

}  // namespace

size_t row_reduce_scratch_bytes(int64_t outer, int64_t inner) {
  const int64_t splits = reduce_splits(outer, inner);
  return splits > 1 ? static_cast<size_t>(splits * outer * kMaxReduceStateBytes) : 0;
}

int launch_row_reduce(ReduceKind kind, DType dt, const RowReduceArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int { return reduce_typed<decltype(tag)>(kind, args, stream); });
}

int launch_row_cumsum(DType dt, const void* in, void* out, int64_t outer, int64_t inner, CUstream_st* stream) {
  if (outer == 0 || inner == 0) return 0;
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (std::is_same<T, bool>::value) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      row_cumsum_kernel<T><<<static_cast<unsigned>(outer), kReduceThreads, 0, stream>>>(static_cast<const T*>(in),
                                                                                       static_cast<T*>(out), inner);
      return static_cast<int>(cudaGetLastError());
    }
  });
}

}  // namespace trainrun::cuda
