// CUDA kernels of the unary elementwise ops and clamp; the per-value math is
// tensor/elementwise_math.h, shared with the CPU kernels.
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {
namespace {

template <UnaryOp op, typename T>
struct UnaryFn : ElementTypes<std::conditional_t<op == UnaryOp::LogicalNot, bool, T>, T> {
  __device__ auto operator()(opmath<T> a) const {
    if constexpr (op == UnaryOp::LogicalNot) return !(a != opmath<T>(0));
    else return unary_math<op, opmath<T>>(a);
  }
};

template <typename T>
struct ClampFn : ElementTypes<T, T> {
  bool has_lo, has_hi;
  opmath<T> lo, hi;
  __device__ opmath<T> operator()(opmath<T> a) const { return clamp_math(a, has_lo, lo, has_hi, hi); }
};

template <UnaryOp op>
int launch_unary_op(DType dt, const ElementwiseArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (unary_float_result(op) && !is_floating_cuda<T>()) {
      return static_cast<int>(cudaErrorInvalidValue);  // the host promotes integers to float first
    } else if constexpr (op == UnaryOp::BitwiseNot && is_floating_cuda<T>()) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else if constexpr ((op == UnaryOp::Neg || op == UnaryOp::Relu || op == UnaryOp::Sign) &&
                         std::is_same<T, bool>::value) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      return launch_elementwise(args, stream, UnaryFn<op, T>{});
    }
  });
}

}  // namespace

int launch_unary(UnaryOp op, DType dt, const ElementwiseArgs& args, CUstream_st* stream) {
  switch (op) {
#define TR_UNARY_CASE(name) \
  case UnaryOp::name: return launch_unary_op<UnaryOp::name>(dt, args, stream);
    TR_UNARY_CASE(Exp) TR_UNARY_CASE(Log) TR_UNARY_CASE(Log1p) TR_UNARY_CASE(Sqrt) TR_UNARY_CASE(Rsqrt)
    TR_UNARY_CASE(Sin) TR_UNARY_CASE(Cos) TR_UNARY_CASE(Tanh) TR_UNARY_CASE(Sigmoid) TR_UNARY_CASE(Erf)
    TR_UNARY_CASE(Silu) TR_UNARY_CASE(GeluErf) TR_UNARY_CASE(GeluTanh) TR_UNARY_CASE(Neg) TR_UNARY_CASE(Abs)
    TR_UNARY_CASE(Relu) TR_UNARY_CASE(Sign) TR_UNARY_CASE(Floor) TR_UNARY_CASE(Round) TR_UNARY_CASE(LogicalNot)
    TR_UNARY_CASE(BitwiseNot)
#undef TR_UNARY_CASE
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

int launch_clamp(DType dt, bool has_lo, KernelScalar lo, bool has_hi, KernelScalar hi, const ElementwiseArgs& args,
                 CUstream_st* stream) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (std::is_same<T, bool>::value) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      return launch_elementwise(args, stream, ClampFn<T>{{}, has_lo, has_hi, scalar_as<T>(lo), scalar_as<T>(hi)});
    }
  });
}

}  // namespace trainrun::cuda
