#pragma once
// What the host side (.cc, built by the C++ compiler) hands the CUDA kernels
// (.cu, built by nvcc): plain structs and enums, so that neither side includes
// the other's headers. Every launch_* function queues its kernel on `stream`
// and returns the launch's cudaError_t as an int (0: success); callers wrap it
// in TR_CUDA_CHECK.
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/elementwise_math.h"  // BinaryOp, UnaryOp

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

namespace trainrun::cuda {

enum class ReduceKind : int {
  Sum, Prod, Max, Min, ArgMax, ArgMin, All, Any,
  Norm0, Norm1, Norm2, NormInf, NormNegInf, NormP, Var, LogSumExp,
};

// A reduction of each row of a contiguous [outer, inner] matrix (ReducePlan's
// rows) into out[outer]. Output dtypes: Sum/Prod give int64 for integer and
// bool inputs, else the input's; All/Any give Bool; ArgMax/ArgMin give Int64
// (in `out`); Max/Min also write the winning index to `indices` when it is set.
struct RowReduceArgs {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t* indices = nullptr;
  int64_t outer = 0;
  int64_t inner = 0;
  double scale = 1;       // Sum: multiplies the result (mean: 1/inner)
  double p = 2;           // NormP
  int64_t correction = 1;  // Var
  void* scratch = nullptr;  // device memory of row_reduce_scratch_bytes(outer, inner) bytes
};

// Device scratch a row reduction of this shape needs for the partial results
// of rows split over several blocks (0: none). The host allocates it through
// the caching allocator, so it shows in the memory statistics.
size_t row_reduce_scratch_bytes(int64_t outer, int64_t inner);

int launch_row_reduce(ReduceKind kind, DType in, const RowReduceArgs& args, CUstream_st* stream);
// Inclusive prefix sums along each row of a contiguous [outer, inner] matrix;
// in and out have dtype dt.
int launch_row_cumsum(DType dt, const void* in, void* out, int64_t outer, int64_t inner, CUstream_st* stream);

}  // namespace trainrun::cuda

namespace trainrun::cuda {

// softmax or log_softmax of each row of a contiguous [rows, n] matrix.
int launch_softmax(DType dt, bool log_output, const void* in, void* out, int64_t rows, int64_t n, CUstream_st* stream);
// layer_norm (or rms_norm) of each row: out, and per row the mean (0 for
// rms) and 1/std; weight and bias may be null.
int launch_row_norm(DType dt, bool rms, const void* x, const void* weight, const void* bias, void* out, void* mean,
                    void* rstd, int64_t rows, int64_t n, double eps, CUstream_st* stream);

enum class TernaryOp : int { Lerp, Addcmul, Addcdiv };
// out = op(a, b, c) computed in dt (value: addcmul/addcdiv's scale).
int launch_ternary(TernaryOp op, DType dt, KernelScalar value, const ElementwiseArgs& args, CUstream_st* stream);

// One fused Adam/AdamW step over n contiguous float32 or float64 elements
// (max_exp_avg_sq only with amsgrad).
struct AdamKernelArgs {
  double lr, beta1, beta2, eps, weight_decay, step;
  bool amsgrad, maximize, decoupled;
};
int launch_fused_adam(DType dt, void* param, const void* grad, void* exp_avg, void* exp_avg_sq, void* max_exp_avg_sq,
                      int64_t n, const AdamKernelArgs& args, CUstream_st* stream);

}  // namespace trainrun::cuda
