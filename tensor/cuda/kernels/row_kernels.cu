// Row-wise CUDA kernels: softmax / log_softmax and layer_norm / rms_norm, one
// block per row with block-level reductions in float (double for float64);
// also the ternary elementwise ops and the fused Adam step (adam_update.h).
#include <cuda/std/limits>

#include "tensor/adam_update.h"
#include "tensor/cuda/kernels/reduce_loop.cuh"

namespace trainrun::cuda {
namespace {

template <typename Acc>
struct MaxOp {
  __device__ Acc init() const { return -::cuda::std::numeric_limits<Acc>::infinity(); }
  __device__ Acc combine(Acc a, Acc b) const { return a > b ? a : b; }
};

template <typename Acc>
struct SumOp {
  __device__ Acc init() const { return Acc(0); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
};

// Every thread of the block gets the combined value.
template <typename R, typename Acc>
__device__ Acc block_all_combine(const R& r, Acc v) {
  __shared__ Acc result;
  v = block_combine(r, v);
  if (threadIdx.x == 0) result = v;
  __syncthreads();
  Acc out = result;
  __syncthreads();  // result may be reused by the next call
  return out;
}

template <typename T, bool log_output>
__global__ void __launch_bounds__(kReduceThreads) softmax_kernel(const T* in, T* out, int64_t n) {
  using Acc = opmath<T>;
  const T* x = in + static_cast<int64_t>(blockIdx.x) * n;
  T* y = out + static_cast<int64_t>(blockIdx.x) * n;
  Acc m = MaxOp<Acc>{}.init();
  for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) m = max(m, convert<Acc>(x[i]));
  m = block_all_combine(MaxOp<Acc>{}, m);
  if (m == -::cuda::std::numeric_limits<Acc>::infinity()) m = Acc(0);  // an all -inf row, as the CPU
  Acc s = 0;
  for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) s += exp(convert<Acc>(x[i]) - m);
  s = block_all_combine(SumOp<Acc>{}, s);
  if (log_output) {
    const Acc shift = m + log(s);
    for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) y[i] = convert<T>(convert<Acc>(x[i]) - shift);
  } else {
    const Acc inv = Acc(1) / s;
    for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) y[i] = convert<T>(exp(convert<Acc>(x[i]) - m) * inv);
  }
}

template <typename T, bool rms>
__global__ void __launch_bounds__(kReduceThreads)
    row_norm_kernel(const T* in, const T* w, const T* b, T* out, T* mean_out, T* rstd_out, int64_t n, double eps) {
  using Acc = opmath<T>;
  const int64_t row = blockIdx.x;
  const T* x = in + row * n;
  T* y = out + row * n;
  Acc mean = 0;
  if (!rms) {
    Acc s = 0;
    for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) s += convert<Acc>(x[i]);
    mean = block_all_combine(SumOp<Acc>{}, s) / static_cast<Acc>(n);
  }
  // Second pass over the (cached) row: exact like the CPU's two passes.
  Acc ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) {
    const Acc d = convert<Acc>(x[i]) - mean;
    ss += d * d;
  }
  ss = block_all_combine(SumOp<Acc>{}, ss);
  const Acc rstd = Acc(1) / sqrt(ss / static_cast<Acc>(n) + static_cast<Acc>(eps));
  if (threadIdx.x == 0) {
    mean_out[row] = convert<T>(mean);
    rstd_out[row] = convert<T>(rstd);
  }
  for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) {
    Acc v = (convert<Acc>(x[i]) - mean) * rstd;
    if (w != nullptr) v *= convert<Acc>(w[i]);
    if (b != nullptr) v += convert<Acc>(b[i]);
    y[i] = convert<T>(v);
  }
}

template <TernaryOp op, typename T>
struct TernaryFn : ElementTypes<T, T, T, T> {
  opmath<T> value;
  __device__ opmath<T> operator()(opmath<T> a, opmath<T> b, opmath<T> c) const {
    if constexpr (op == TernaryOp::Lerp) return lerp_math(a, b, c);
    else if constexpr (op == TernaryOp::Addcmul) return a + value * (b * c);
    else return a + value * (b / c);
  }
};

template <typename T>
__global__ void fused_adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, AdamCoefficients<T> c) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    adam_element(p, g, m, v, vmax, i, c);
}

}  // namespace

int launch_softmax(DType dt, bool log_output, const void* in, void* out, int64_t rows, int64_t n, CUstream_st* stream) {
  if (rows == 0 || n == 0) return 0;
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (!is_floating_cuda<T>()) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      if (log_output)
        softmax_kernel<T, true><<<static_cast<unsigned>(rows), kReduceThreads, 0, stream>>>(
            static_cast<const T*>(in), static_cast<T*>(out), n);
      else
        softmax_kernel<T, false><<<static_cast<unsigned>(rows), kReduceThreads, 0, stream>>>(
            static_cast<const T*>(in), static_cast<T*>(out), n);
      return static_cast<int>(cudaGetLastError());
    }
  });
}

int launch_row_norm(DType dt, bool rms, const void* x, const void* weight, const void* bias, void* out, void* mean,
                    void* rstd, int64_t rows, int64_t n, double eps, CUstream_st* stream) {
  if (rows == 0) return 0;
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (!is_floating_cuda<T>()) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      auto args = [&](auto kernel) {
        kernel<<<static_cast<unsigned>(rows), kReduceThreads, 0, stream>>>(
            static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias), static_cast<T*>(out),
            static_cast<T*>(mean), static_cast<T*>(rstd), n, eps);
      };
      if (rms) args(row_norm_kernel<T, true>);
      else args(row_norm_kernel<T, false>);
      return static_cast<int>(cudaGetLastError());
    }
  });
}

int launch_ternary(TernaryOp op, DType dt, KernelScalar value, const ElementwiseArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (std::is_same<T, bool>::value) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      const opmath<T> v = scalar_as<T>(value);
      switch (op) {
        case TernaryOp::Lerp:
          if constexpr (!is_floating_cuda<T>()) return static_cast<int>(cudaErrorInvalidValue);
          else return launch_elementwise(args, stream, TernaryFn<TernaryOp::Lerp, T>{{}, v});
        case TernaryOp::Addcmul: return launch_elementwise(args, stream, TernaryFn<TernaryOp::Addcmul, T>{{}, v});
        case TernaryOp::Addcdiv: return launch_elementwise(args, stream, TernaryFn<TernaryOp::Addcdiv, T>{{}, v});
      }
      return static_cast<int>(cudaErrorInvalidValue);
    }
  });
}

int launch_fused_adam(DType dt, void* param, const void* grad, void* exp_avg, void* exp_avg_sq, void* max_exp_avg_sq,
                      int64_t n, const AdamKernelArgs& a, CUstream_st* stream) {
  if (n == 0) return 0;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, int64_t(multiprocessor_count()) * 8);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const AdamCoefficients<T> c = adam_coefficients<T>(a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.step,
                                                       a.amsgrad, a.maximize, a.decoupled);
    fused_adam_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
        static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(exp_avg), static_cast<T*>(exp_avg_sq),
        static_cast<T*>(max_exp_avg_sq), n, c);
    return static_cast<int>(cudaGetLastError());
  };
  if (dt == DType::Float32) return run(float{});
  if (dt == DType::Float64) return run(double{});
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace trainrun::cuda
