// CUDA kernels of the binary elementwise ops, add with alpha, and where.
// The per-value math is tensor/elementwise_math.h, shared with the CPU
// kernels; integer division by zero gives 0 here (PyTorch's CUDA result is
// unspecified too), where the CPU raises.
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {
namespace {

template <BinaryOp op, typename T>
struct BinaryFn {
  __device__ void operator()(char** p) const {
    using Out = std::conditional_t<binary_bool_result(op), bool, T>;
    store<Out>(p[0], binary_math<op, opmath<T>>(load<T>(p[1]), load<T>(p[2])));
  }
};

template <typename T>
struct AddFn {
  opmath<T> alpha;
  __device__ void operator()(char** p) const { store<T>(p[0], load<T>(p[1]) + alpha * load<T>(p[2])); }
};

template <typename T>
struct AddOneFn {
  __device__ void operator()(char** p) const { store<T>(p[0], load<T>(p[1]) + load<T>(p[2])); }
};

struct OrFn {
  __device__ void operator()(char** p) const { store<bool>(p[0], load<bool>(p[1]) || load<bool>(p[2])); }
};

template <typename T>
struct WhereFn {
  __device__ void operator()(char** p) const {
    *reinterpret_cast<T*>(p[0]) =
        *reinterpret_cast<const bool*>(p[1]) ? *reinterpret_cast<const T*>(p[2]) : *reinterpret_cast<const T*>(p[3]);
  }
};

template <BinaryOp op>
int launch_binary_op(DType dt, const ElementwiseArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    constexpr bool bitwise = op == BinaryOp::BitwiseAnd || op == BinaryOp::BitwiseOr || op == BinaryOp::BitwiseXor;
    constexpr bool numeric_only = op == BinaryOp::Div || op == BinaryOp::DivTrunc || op == BinaryOp::DivFloor ||
                                  op == BinaryOp::Remainder;
    if constexpr (bitwise && is_floating_cuda<T>()) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else if constexpr (numeric_only && std::is_same<T, bool>::value) {
      return static_cast<int>(cudaErrorInvalidValue);
    } else {
      return launch_elementwise<3>(args, stream, BinaryFn<op, T>{});
    }
  });
}

}  // namespace

int launch_binary(BinaryOp op, DType dt, const ElementwiseArgs& args, CUstream_st* stream) {
  switch (op) {
#define TR_BINARY_CASE(name) \
  case BinaryOp::name: return launch_binary_op<BinaryOp::name>(dt, args, stream);
    TR_BINARY_CASE(Mul) TR_BINARY_CASE(Div) TR_BINARY_CASE(DivTrunc) TR_BINARY_CASE(DivFloor)
    TR_BINARY_CASE(Remainder) TR_BINARY_CASE(Pow) TR_BINARY_CASE(Maximum) TR_BINARY_CASE(Minimum)
    TR_BINARY_CASE(Eq) TR_BINARY_CASE(Ne) TR_BINARY_CASE(Lt) TR_BINARY_CASE(Le) TR_BINARY_CASE(Gt)
    TR_BINARY_CASE(Ge) TR_BINARY_CASE(LogicalAnd) TR_BINARY_CASE(LogicalOr) TR_BINARY_CASE(LogicalXor)
    TR_BINARY_CASE(BitwiseAnd) TR_BINARY_CASE(BitwiseOr) TR_BINARY_CASE(BitwiseXor)
#undef TR_BINARY_CASE
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

int launch_add(DType dt, KernelScalar alpha, const ElementwiseArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (std::is_same<T, bool>::value) {
      return launch_elementwise<3>(args, stream, OrFn{});
    } else {
      const opmath<T> al = scalar_as<T>(alpha);
      if (al == opmath<T>(1)) return launch_elementwise<3>(args, stream, AddOneFn<T>{});
      return launch_elementwise<3>(args, stream, AddFn<T>{al});
    }
  });
}

int launch_where(DType dt, const ElementwiseArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    return launch_elementwise<4>(args, stream, WhereFn<T>{});
  });
}

}  // namespace trainrun::cuda
