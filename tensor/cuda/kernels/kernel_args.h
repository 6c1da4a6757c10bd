#pragma once
// What the host side (.cc, built by the C++ compiler) hands the CUDA kernels
// (.cu, built by nvcc): plain structs and enums, so that neither side includes
// the other's headers. Every launch_* function queues its kernel on `stream`
// and returns the launch's cudaError_t as an int (0: success); callers wrap it
// in TR_CUDA_CHECK.
#include <cstdint>

#include "tensor/dtype.h"

struct CUstream_st;

namespace trainrun::cuda {

constexpr int kMaxElementwiseDims = 16;
constexpr int kMaxElementwiseOperands = 4;

// One elementwise launch: operand 0 is the output. Sizes are innermost first
// and strides in bytes, as TensorIterator coalesced them. An operand whose
// data is null is a CPU scalar, passed by value in `scalars`.
struct ElementwiseArgs {
  int ndim = 0;
  int nops = 0;
  int64_t numel = 0;
  bool contiguous = false;  // every tensor operand dense with element-sized steps
  int64_t sizes[kMaxElementwiseDims] = {};
  int64_t strides[kMaxElementwiseDims][kMaxElementwiseOperands] = {};
  int64_t element_size[kMaxElementwiseOperands] = {};
  char* data[kMaxElementwiseOperands] = {};
  alignas(8) char scalars[kMaxElementwiseOperands][8] = {};
};

// A number for a kernel: floating compute types read f, integral ones i.
struct KernelScalar {
  double f = 0;
  int64_t i = 0;
};

enum class BinaryOp : int {
  Mul, Div, DivTrunc, DivFloor, Remainder, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor, BitwiseAnd, BitwiseOr, BitwiseXor,
};
constexpr bool binary_bool_result(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::LogicalXor; }

enum class UnaryOp : int {
  Exp, Log, Log1p, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Erf, Silu, GeluErf, GeluTanh,  // float results
  Neg, Abs, Relu, Sign, Floor, Round,                                                // same dtype
  LogicalNot, BitwiseNot,
};
constexpr bool unary_float_result(UnaryOp op) { return op <= UnaryOp::GeluTanh; }

// out = a op b, computed in `compute` (out is Bool for comparisons and
// logical ops, else `compute`).
int launch_binary(BinaryOp op, DType compute, const ElementwiseArgs& args, CUstream_st* stream);
// out = a + alpha * b.
int launch_add(DType dt, KernelScalar alpha, const ElementwiseArgs& args, CUstream_st* stream);
// out = op(a); out's dtype is Bool for LogicalNot, else `dt`.
int launch_unary(UnaryOp op, DType dt, const ElementwiseArgs& args, CUstream_st* stream);
int launch_clamp(DType dt, bool has_lo, KernelScalar lo, bool has_hi, KernelScalar hi, const ElementwiseArgs& args,
                 CUstream_st* stream);
// out (dtype dst) = in (dtype src), converting.
int launch_copy(DType dst, DType src, const ElementwiseArgs& args, CUstream_st* stream);
// out = cond ? a : b, cond Bool, a and b of dtype dt.
int launch_where(DType dt, const ElementwiseArgs& args, CUstream_st* stream);

}  // namespace trainrun::cuda
