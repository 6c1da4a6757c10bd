// CUDA kernels of the unary elementwise ops and clamp; the math mirrors
// tensor/cpu/unary_kernels.cc.
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {
namespace {

template <UnaryOp op, typename T>
__device__ __forceinline__ T apply(T x) {
  constexpr double kSqrt1_2 = 0.70710678118654752440;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  if constexpr (op == UnaryOp::Exp) return exp(x);
  else if constexpr (op == UnaryOp::Log) return log(x);
  else if constexpr (op == UnaryOp::Log1p) return log1p(x);
  else if constexpr (op == UnaryOp::Sqrt) return sqrt(x);
  else if constexpr (op == UnaryOp::Rsqrt) return T(1) / sqrt(x);
  else if constexpr (op == UnaryOp::Sin) return sin(x);
  else if constexpr (op == UnaryOp::Cos) return cos(x);
  else if constexpr (op == UnaryOp::Tanh) return tanh(x);
  else if constexpr (op == UnaryOp::Sigmoid) return T(1) / (T(1) + exp(-x));
  else if constexpr (op == UnaryOp::Erf) return erf(x);
  else if constexpr (op == UnaryOp::Silu) return x / (T(1) + exp(-x));
  else if constexpr (op == UnaryOp::GeluErf) return T(0.5) * x * (T(1) + erf(x * T(kSqrt1_2)));
  else if constexpr (op == UnaryOp::GeluTanh)
    return T(0.5) * x * (T(1) + tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x)));
  else if constexpr (op == UnaryOp::Neg) return -x;
  else if constexpr (op == UnaryOp::Abs) { if constexpr (std::is_unsigned<T>::value) return x; else return x < 0 ? -x : x; }
  else if constexpr (op == UnaryOp::Relu) return x > T(0) ? x : (x != x ? x : T(0));  // NaN passes through
  else if constexpr (op == UnaryOp::Sign) return static_cast<T>((T(0) < x) - (x < T(0)));
  else if constexpr (op == UnaryOp::Floor) { if constexpr (std::is_floating_point<T>::value) return floor(x); else return x; }
  else if constexpr (op == UnaryOp::Round) { if constexpr (std::is_floating_point<T>::value) return nearbyint(x); else return x; }
  else if constexpr (op == UnaryOp::BitwiseNot) { if constexpr (std::is_same<T, bool>::value) return !x; else return static_cast<T>(~x); }
  else return x;
}

template <UnaryOp op, typename T>
struct UnaryFn {
  __device__ void operator()(char** p) const {
    if constexpr (op == UnaryOp::LogicalNot) store<bool>(p[0], !(load<T>(p[1]) != opmath<T>(0)));
    else store<T>(p[0], apply<op, opmath<T>>(load<T>(p[1])));
  }
};

template <typename T>
struct ClampFn {
  bool has_lo, has_hi;
  opmath<T> lo, hi;
  __device__ void operator()(char** p) const {
    opmath<T> v = load<T>(p[1]);
    if (!(v != v)) {  // NaN stays NaN
      if (has_lo && v < lo) v = lo;
      if (has_hi && v > hi) v = hi;
    }
    store<T>(p[0], v);
  }
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
      return launch_elementwise<2>(args, stream, UnaryFn<op, T>{});
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
      return launch_elementwise<2>(args, stream, ClampFn<T>{has_lo, has_hi, scalar_as<T>(lo), scalar_as<T>(hi)});
    }
  });
}

}  // namespace trainrun::cuda
