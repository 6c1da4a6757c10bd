// CUDA kernels of the binary elementwise ops, add with alpha, and where.
// The math mirrors tensor/cpu/binary_kernels.cc so both devices agree.
#include "tensor/cuda/kernels/elementwise_loop.cuh"

namespace trainrun::cuda {
namespace {

template <typename T>
__device__ T int_pow(T base, T exp) {
  if constexpr (std::is_signed<T>::value) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2) ? -1 : 1;
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<T>(result * base);
    base = static_cast<T>(base * base);
    exp = static_cast<T>(exp >> 1);
  }
  return result;
}

// The op on math values of T. Integer division by zero has no exception to
// raise on the device; it gives 0 (PyTorch's CUDA result is unspecified too).
template <BinaryOp op, typename T, typename Acc = opmath<T>>
__device__ __forceinline__ auto apply(Acc a, Acc b) {
  constexpr bool is_float = std::is_floating_point<Acc>::value;
  if constexpr (op == BinaryOp::Mul) {
    if constexpr (std::is_same<T, bool>::value) return a && b; else return a * b;
  } else if constexpr (op == BinaryOp::Div) {
    return a / b;
  } else if constexpr (op == BinaryOp::DivTrunc) {
    if constexpr (is_float) return trunc(a / b);
    else return b == 0 ? Acc(0) : static_cast<Acc>(a / b);
  } else if constexpr (op == BinaryOp::DivFloor) {
    if constexpr (is_float) {
      if (b == 0) return a / b;
      Acc mod = fmod(a, b), div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
      Acc fl = floor(div);
      if (div - fl > Acc(0.5)) fl += 1;
      return div == 0 ? copysign(Acc(0), a / b) : fl;
    } else {
      if (b == 0) return Acc(0);
      Acc q = static_cast<Acc>(a / b);
      if ((a % b != 0) && ((a < 0) != (b < 0))) q = static_cast<Acc>(q - 1);
      return q;
    }
  } else if constexpr (op == BinaryOp::Remainder) {
    if constexpr (is_float) {
      Acc r = fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      if (b == 0) return Acc(0);
      Acc r = static_cast<Acc>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<Acc>(r + b);
      return r;
    }
  } else if constexpr (op == BinaryOp::Pow) {
    if constexpr (is_float) return pow(a, b);
    else if constexpr (std::is_same<Acc, bool>::value) return a || !b;
    else return int_pow<Acc>(a, b);
  } else if constexpr (op == BinaryOp::Maximum) {
    if constexpr (is_float) { if (a != a || b != b) return a + b; }
    return a > b ? a : b;
  } else if constexpr (op == BinaryOp::Minimum) {
    if constexpr (is_float) { if (a != a || b != b) return a + b; }
    return a < b ? a : b;
  }
  else if constexpr (op == BinaryOp::Eq) return a == b;
  else if constexpr (op == BinaryOp::Ne) return a != b;
  else if constexpr (op == BinaryOp::Lt) return a < b;
  else if constexpr (op == BinaryOp::Le) return a <= b;
  else if constexpr (op == BinaryOp::Gt) return a > b;
  else if constexpr (op == BinaryOp::Ge) return a >= b;
  else if constexpr (op == BinaryOp::LogicalAnd) return a != Acc(0) && b != Acc(0);
  else if constexpr (op == BinaryOp::LogicalOr) return a != Acc(0) || b != Acc(0);
  else if constexpr (op == BinaryOp::LogicalXor) return (a != Acc(0)) != (b != Acc(0));
  else if constexpr (op == BinaryOp::BitwiseAnd) return static_cast<Acc>(a & b);
  else if constexpr (op == BinaryOp::BitwiseOr) return static_cast<Acc>(a | b);
  else return static_cast<Acc>(a ^ b);
}

template <BinaryOp op, typename T>
struct BinaryFn {
  __device__ void operator()(char** p) const {
    using Out = std::conditional_t<binary_bool_result(op), bool, T>;
    store<Out>(p[0], apply<op, T>(load<T>(p[1]), load<T>(p[2])));
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
