// Matrix products on CUDA tensors through cuBLAS (cublasGemmEx and its
// strided-batched form), registered under DispatchKey::CUDA. Row-major C = A B
// is computed as column-major C^T = B^T A^T, so no operand is transposed in
// memory: a matrix whose last stride is 1 is read as is, one whose first
// stride is 1 as a transpose, anything else is copied first. float16 and
// bfloat16 accumulate in float32 (tensor cores); float32 uses TF32 tensor
// cores only when allowed (blas_handle.h).
#include <cublas_v2.h>

#include <algorithm>

#include "tensor/cuda/blas_handle.h"
#include "tensor/cuda/runtime.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/linalg.h"
#include "tensor/op_schemas.h"
#include "tensor/views.h"

namespace trainrun::cuda {
namespace {

// One matrix (the last two dims of t) as cuBLAS reads it.
struct GemmOperand {
  Tensor t;
  bool trans;
  int64_t ld;
};

GemmOperand gemm_operand(const Tensor& m) {
  const int64_t nd = m.dim();
  const int64_t rows = m.size(nd - 2), cols = m.size(nd - 1);
  const int64_t s0 = m.stride(nd - 2), s1 = m.stride(nd - 1);
  if (s1 == 1 && (s0 >= std::max<int64_t>(1, cols) || rows == 1)) return {m, false, std::max<int64_t>({s0, cols, 1})};
  if (s0 == 1 && (s1 >= std::max<int64_t>(1, rows) || cols == 1)) return {m, true, std::max<int64_t>({s1, rows, 1})};
  Tensor c = contiguous(m);
  return {c, false, std::max<int64_t>(cols, 1)};
}

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

GemmTypes gemm_types(DType dt, const char* op) {
  switch (dt) {
    case DType::Float32: return {CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::Float16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case DType::BFloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case DType::Float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
    default:
      throw NotImplementedError(fmt::format("{}: CUDA matrix products support float16, bfloat16, float32 and float64, "
                                            "not {} (cuBLAS has no such GEMM; convert first)",
                                            op, dtype_name(dt)));
  }
}

void check_cublas(cublasStatus_t st, const char* op) {
  TR_CHECK(st == CUBLAS_STATUS_SUCCESS, CudaError, "{}: cuBLAS failed: {} ({})", op, cublasGetStatusName(st),
           cublasGetStatusString(st));
}

// out (contiguous, [..., M, N]) = alpha * a @ b + beta * out, batched over
// the leading dim when a and b are 3-D (batch stride 0 broadcasts).
void gemm_into(Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta, const char* op) {
  const int64_t nd = a.dim();
  const int64_t M = a.size(nd - 2), K = a.size(nd - 1), N = b.size(nd - 1);
  const int64_t batch = nd == 3 ? a.size(0) : 1;
  if (M == 0 || N == 0 || batch == 0) return;
  if (K == 0) {  // an empty sum: beta * out
    if (beta == 0) zero_(out);
    else out.copy_(mul(out, scalar_tensor(beta, out.dtype())));
    return;
  }
  const GemmTypes types = gemm_types(a.dtype(), op);
  GemmOperand A = gemm_operand(a), B = gemm_operand(b);
  const int device = out.device().index;
  DeviceGuard guard(device);
  cublasHandle_t h = cublas_handle(device);
  // Scalars in the compute type's precision.
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const void* pa = types.compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&alpha) : &alpha_f;
  const void* pb = types.compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&beta) : &beta_f;
  // Column-major view: C^T[N, M] = op(B^T)[N, K] * op(A^T)[K, M].
  const cublasOperation_t opB = B.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = A.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1 && nd == 2) {
    check_cublas(cublasGemmEx(h, opB, opA, N, M, K, pa, B.t.data_ptr(), types.data, B.ld, A.t.data_ptr(), types.data,
                              A.ld, pb, out.data_ptr(), types.data, N, types.compute, CUBLAS_GEMM_DEFAULT),
                 op);
    return;
  }
  check_cublas(cublasGemmStridedBatchedEx(h, opB, opA, N, M, K, pa, B.t.data_ptr(), types.data, B.ld, B.t.stride(0),
                                          A.t.data_ptr(), types.data, A.ld, A.t.stride(0), pb, out.data_ptr(),
                                          types.data, N, M * N, batch, types.compute, CUBLAS_GEMM_DEFAULT),
               op);
}

Tensor mm_cuda(const Tensor& a, const Tensor& b, const Tensor& out_arg) {
  check_mm(a, b, "mm");
  IntList shape = {a.size(0), b.size(1)};
  const bool direct = out_arg.defined() && out_arg.is_contiguous() && out_arg.sizes() == shape &&
                      out_arg.dtype() == a.dtype() && out_arg.device() == a.device();
  Tensor out = direct ? out_arg : empty(shape, TensorOptions(a.dtype(), a.device()));
  gemm_into(out, a, b, 1.0, 0.0, "mm");
  if (out_arg.defined() && !out.is_same(out_arg)) {  // out= of another dtype or layout (shape checked in mm_out)
    Tensor dst = out_arg;
    copy_(dst, out);
    return dst;
  }
  return out;
}

Tensor addmm_cuda(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_mm(a, b, "addmm");
  Tensor out = empty({a.size(0), b.size(1)}, TensorOptions(a.dtype(), a.device()));
  const double be = beta.to_double();
  if (be != 0) copy_(out, self);  // broadcasts self (e.g. a bias row)
  gemm_into(out, a, b, alpha.to_double(), be, "addmm");
  return out;
}

// (cuBLASLt's epilogues would apply the activation as it writes; here it is a second pass.)
Tensor addmm_activation_cuda(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                             const Scalar& alpha, bool use_gelu) {
  Tensor out = addmm_cuda(self, a, b, beta, alpha);
  return use_gelu ? gelu(out) : relu(out);
}

Tensor baddbmm_cuda(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_bmm(a, b);
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, TensorOptions(a.dtype(), a.device()));
  const double be = self.defined() ? beta.to_double() : 0.0;
  if (be != 0) copy_(out, self);
  gemm_into(out, a, b, alpha.to_double(), be, "bmm");
  return out;
}

OpKernel<ops::mm> reg_mm(DispatchKey::CUDA, &mm_cuda);
OpKernel<ops::addmm> reg_addmm(DispatchKey::CUDA, &addmm_cuda);
OpKernel<ops::_addmm_activation> reg_addmm_activation(DispatchKey::CUDA, &addmm_activation_cuda);
OpKernel<ops::baddbmm> reg_baddbmm(DispatchKey::CUDA, &baddbmm_cuda);

}  // namespace
}  // namespace trainrun::cuda
