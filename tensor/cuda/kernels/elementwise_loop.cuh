#pragma once
// The one elementwise loop of the CUDA kernels (the device half of
// TensorIterator). A functor names its element types (ElementTypes: the
// output's, then each input's) and maps input values, in their math types, to
// the output value; the loop does the addressing (element_access.h), loads
// and stores. Each thread handles kUnroll elements a block-width apart, so
// accesses stay coalesced, and loads all of their inputs before it stores any
// output: loads and stores interleaved element by element must stay in that
// order (an output may alias a later input as far as the compiler knows), so
// only two loads were in flight per thread and add reached 57% of the copy
// bandwidth on an H200. Dense, aligned operands go a Pack (16 bytes of floats)
// at a time, as PyTorch's vectorized loop does.
#include <cuda/std/tuple>
#include <cuda/std/utility>
#include <cuda_runtime.h>

#include "tensor/cuda/kernels/element_access.h"

namespace trainrun::cuda {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// The element types of an elementwise functor: Out_ is written, In_... read.
template <typename Out_, typename... In_>
struct ElementTypes {
  using Out = Out_;
  using In = ::cuda::std::tuple<In_...>;
};

// kUnroll consecutive elements of one operand, loaded or stored at once (one
// 16-byte access for 4-byte types).
template <typename T>
struct alignas(sizeof(T) * kUnroll) Pack {
  T v[kUnroll];
};

template <typename F, typename In = typename F::In>
struct ElementwiseTile;

template <typename F, typename... In>
struct ElementwiseTile<F, ::cuda::std::tuple<In...>> {
  using Out = typename F::Out;
  static constexpr int kOperands = static_cast<int>(sizeof...(In)) + 1;
  using Inputs = ::cuda::std::make_index_sequence<sizeof...(In)>;

  // Whether run_packed may serve args: dense operands whose addresses suit
  // their Packs (a view at an odd offset takes the general path).
  static bool packs_fit(const ElementwiseArgs& args) { return packs_fit(args, Inputs{}); }

  // General layouts: this thread's kUnroll elements are a block-width apart
  // from tile offset `base`.
  template <size_t... K>
  __device__ static TR_FORCEINLINE void run(const ElementwiseArgs& args, char (*scalar_slots)[8], const F& f,
                                            int64_t base, ::cuda::std::index_sequence<K...>) {
    ::cuda::std::tuple<opmath<In>...> values[kUnroll];
    char* out[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + threadIdx.x;
      if (i < args.numel) {
        char* p[kOperands];
        operand_pointers<kOperands>(args, i, p, scalar_slots);
        out[u] = p[0];
        values[u] = ::cuda::std::tuple<opmath<In>...>(load<In>(p[K + 1])...);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * kThreads + threadIdx.x < args.numel) store<Out>(out[u], ::cuda::std::apply(f, values[u]));
    }
  }

  // Dense, aligned operands: this thread's kUnroll elements are consecutive,
  // read and written as one Pack per operand.
  template <size_t... K>
  __device__ static TR_FORCEINLINE void run_packed(const ElementwiseArgs& args, char (*scalar_slots)[8], const F& f,
                                                   int64_t base, ::cuda::std::index_sequence<K...> inputs) {
    const int64_t first = base + static_cast<int64_t>(threadIdx.x) * kUnroll;
    if (first + kUnroll > args.numel) {  // the ragged end: element by element
      for (int64_t i = first; i < args.numel; ++i) {
        char* p[kOperands];
        operand_pointers<kOperands>(args, i, p, scalar_slots);
        store<Out>(p[0], f(load<In>(p[K + 1])...));
      }
      return;
    }
    const ::cuda::std::tuple<Pack<In>...> packs(load_pack<In>(args, K + 1, first, scalar_slots)...);
    Pack<Out> out;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) out.v[u] = convert<Out>(f(convert<opmath<In>>(::cuda::std::get<K>(packs).v[u])...));
    *reinterpret_cast<Pack<Out>*>(args.data[0] + first * static_cast<int64_t>(sizeof(Out))) = out;
  }

 private:
  template <typename T>
  __device__ static TR_FORCEINLINE Pack<T> load_pack(const ElementwiseArgs& args, int k, int64_t first,
                                                     char (*scalar_slots)[8]) {
    if (args.data[k] != nullptr)
      return *reinterpret_cast<const Pack<T>*>(args.data[k] + first * static_cast<int64_t>(sizeof(T)));
    Pack<T> broadcast;  // a scalar operand
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) broadcast.v[u] = *reinterpret_cast<const T*>(scalar_slots[k]);
    return broadcast;
  }

  template <size_t... K>
  static bool packs_fit(const ElementwiseArgs& args, ::cuda::std::index_sequence<K...>) {
    const auto fits = [](const char* p, size_t size) {
      return p == nullptr || reinterpret_cast<uintptr_t>(p) % (size * kUnroll) == 0;
    };
    return args.contiguous && fits(args.data[0], sizeof(Out)) && (fits(args.data[K + 1], sizeof(In)) && ...);
  }
};

template <typename F>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(ElementwiseArgs args, F f, bool packed) {
  using Tile = ElementwiseTile<F>;
  // The scalar operands' values, where operand pointers may point (see
  // operand_pointers: never at the parameter itself).
  __shared__ alignas(8) char scalar_slots[Tile::kOperands][8];
  if (threadIdx.x < Tile::kOperands * 8)
    scalar_slots[threadIdx.x / 8][threadIdx.x % 8] = args.scalars[threadIdx.x / 8][threadIdx.x % 8];
  __syncthreads();
  const int64_t tile = static_cast<int64_t>(kThreads) * kUnroll;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * tile; base < args.numel;
       base += static_cast<int64_t>(gridDim.x) * tile) {
    if (packed) Tile::run_packed(args, scalar_slots, f, base, typename Tile::Inputs{});
    else Tile::run(args, scalar_slots, f, base, typename Tile::Inputs{});
  }
}

// Queues f over every element of args on `stream`.
template <typename F>
int launch_elementwise(const ElementwiseArgs& args, CUstream_st* stream, F f) {
  using Tile = ElementwiseTile<F>;
  if (args.numel == 0) return 0;
  // The host packed another operand count than the functor reads.
  if (args.nops != Tile::kOperands) return static_cast<int>(cudaErrorInvalidConfiguration);
  const int64_t tile = static_cast<int64_t>(kThreads) * kUnroll;
  int64_t blocks = (args.numel + tile - 1) / tile;
  if (blocks > (int64_t(1) << 30)) blocks = int64_t(1) << 30;  // the loop strides over the rest
  elementwise_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args, f, Tile::packs_fit(args));
  return static_cast<int>(cudaGetLastError());
}

// Blocks of 256 threads for a grid-stride loop over n elements.
inline unsigned grid_blocks(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b > (int64_t(1) << 30) ? (int64_t(1) << 30) : (b < 1 ? 1 : b));
}

// Runs its statement for each i in [0, n), spread over the whole grid.
#define TR_GRID_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Calls f(T{}) with T the CUDA type of dt.
template <typename F>
int visit_cuda_dtype(DType dt, F f) {
  switch (dt) {
    case DType::Bool: return f(bool{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float16: return f(__half{});
    case DType::BFloat16: return f(__nv_bfloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace trainrun::cuda
