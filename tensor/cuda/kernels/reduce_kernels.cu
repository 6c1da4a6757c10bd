// CUDA reductions over rows (sum, mean, prod, max/min with and without
// indices, argmax/argmin, all/any, norms, var, logsumexp) with the reducers
// of reducers.h, and cumsum.
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
