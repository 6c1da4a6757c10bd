// CUDA kernels of the binary elementwise ops, add with alpha, and where.
// The per-value math is tensor/elementwise_math.h, shared with the CPU
// kernels; integer division by zero gives 0 here (PyTorch's CUDA result is
// unspecified too), where the CPU raises.
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {
namespace {

template <BinaryOp op, typename T>
struct BinaryFn : ElementTypes<std::conditional_t<binary_bool_result(op), bool, T>, T, T> {
  __device__ auto operator()(opmath<T> a, opmath<T> b) const { return binary_math<op, opmath<T>>(a, b); }
};

template <typename T>
struct AddFn : ElementTypes<T, T, T> {
  opmath<T> alpha;
  __device__ opmath<T> operator()(opmath<T> a, opmath<T> b) const { return a + alpha * b; }
};

template <typename T>
struct AddOneFn : ElementTypes<T, T, T> {
  __device__ opmath<T> operator()(opmath<T> a, opmath<T> b) const { return a + b; }
};

struct OrFn : ElementTypes<bool, bool, bool> {
  __device__ bool operator()(bool a, bool b) const { return a || b; }
};

// The 16-bit floats pass through float exactly, so where copies bits.
template <typename T>
struct WhereFn : ElementTypes<T, bool, T, T> {
  __device__ opmath<T> operator()(bool c, opmath<T> a, opmath<T> b) const { return c ? a : b; }
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
      return launch_elementwise(args, stream, BinaryFn<op, T>{});
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
      return launch_elementwise(args, stream, OrFn{});
    } else {
      const opmath<T> al = scalar_as<T>(alpha);
      if (al == opmath<T>(1)) return launch_elementwise(args, stream, AddOneFn<T>{});
      return launch_elementwise(args, stream, AddFn<T>{{}, al});
    }
  });
}

int launch_where(DType dt, const ElementwiseArgs& args, CUstream_st* stream) {
  return visit_cuda_dtype(dt, [&](auto tag) -> int {
    using T = decltype(tag);
    return launch_elementwise(args, stream, WhereFn<T>{});
  });
}

}  // namespace trainrun::cuda
