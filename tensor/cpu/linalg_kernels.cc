// CPU matrix products: float32 ones of some size on oneDNN's matmul (linear
// layers' with the bias added as it writes the output; matmul_onednn.h says
// why oneDNN), the rest on OpenBLAS. A matrix whose last stride is 1 goes to BLAS as is, one
// whose first stride is 1 as a transpose; anything else is copied first.
// float16/bfloat16 convert to float32 for the GEMM.
#include <cblas.h>

#include <optional>

#include "tensor/cpu/matmul_onednn.h"
#include "tensor/linalg.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

struct BlasOperand {
  Tensor t;       // the matrix BLAS reads (maybe a copy)
  bool trans;     // read as transposed
  int64_t ld;     // leading dimension
};

// How BLAS reads a rows x cols matrix with these strides in place (transposed or not, and its leading
// dimension), or nullopt when it needs a copy.
struct InPlaceLayout {
  bool trans;
  int64_t ld;
};
std::optional<InPlaceLayout> in_place_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (col_stride == 1 && (row_stride >= std::max<int64_t>(1, cols) || rows == 1))
    return InPlaceLayout{false, std::max<int64_t>({row_stride, cols, 1})};
  if (row_stride == 1 && (col_stride >= std::max<int64_t>(1, rows) || cols == 1))
    return InPlaceLayout{true, std::max<int64_t>({col_stride, rows, 1})};
  return std::nullopt;
}

// Describes a 2-D matrix to BLAS without copying when its strides allow.
BlasOperand blas_operand(const Tensor& m) {
  int64_t rows = m.size(0), cols = m.size(1);
  if (const auto layout = in_place_layout(rows, cols, m.stride(0), m.stride(1))) return {m, layout->trans, layout->ld};
  Tensor c = contiguous(m);
  return {c, false, std::max<int64_t>(cols, 1)};
}

// out (contiguous [M, N]) = alpha * a @ b + beta * out, for float/double.
template <typename T>
void gemm(const Tensor& a, const Tensor& b, Tensor& out, double alpha, double beta) {
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if (M == 0 || N == 0) return;
  BlasOperand A = blas_operand(a), B = blas_operand(b);
  const T* pa = static_cast<const T*>(A.t.data_ptr());
  const T* pb = static_cast<const T*>(B.t.data_ptr());
  T* pc = static_cast<T*>(out.data_ptr());
  if constexpr (std::is_same<T, float>::value) {
    if (M * N * K >= kOnednnMinMacs &&
        onednn_gemm({1, M, K, N}, {pa, A.trans, A.ld}, {pb, B.trans, B.ld}, static_cast<float>(alpha),
                    static_cast<float>(beta), pc))
      return;
  }
  auto ta = A.trans ? CblasTrans : CblasNoTrans, tb = B.trans ? CblasTrans : CblasNoTrans;
  int64_t ldc = std::max<int64_t>(N, 1);
  if constexpr (std::is_same<T, float>::value)
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, static_cast<float>(alpha), pa, A.ld, pb, B.ld, static_cast<float>(beta), pc, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, pa, A.ld, pb, B.ld, beta, pc, ldc);
}

// Integer (and bool) matmul: no BLAS; a plain i-k-j loop.
template <typename T>
void gemm_naive(const Tensor& a_in, const Tensor& b_in, Tensor& out, double alpha, double beta) {
  Tensor a = contiguous(a_in), b = contiguous(b_in);
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* pc = static_cast<T*>(out.data_ptr());
  parallel_for(0, M, 16, [&](int64_t r0, int64_t r1) {
    std::vector<double> row(N);
    for (int64_t i = r0; i < r1; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t k = 0; k < K; ++k) {
        double av = static_cast<double>(pa[i * K + k]);
        for (int64_t j = 0; j < N; ++j) row[j] += av * static_cast<double>(pb[k * N + j]);
      }
      for (int64_t j = 0; j < N; ++j) {
        double prev = beta == 0 ? 0 : beta * static_cast<double>(pc[i * N + j]);
        pc[i * N + j] = static_cast<T>(alpha * row[j] + prev);
      }
    }
  });
}

// out = beta * out + alpha * a @ b; out is contiguous [M, N] of a's dtype.
void addmm_into(Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  switch (a.dtype()) {
    case DType::Float32: gemm<float>(a, b, out, alpha, beta); break;
    case DType::Float64: gemm<double>(a, b, out, alpha, beta); break;
    case DType::Float16:
    case DType::BFloat16: {
      Tensor o32 = beta == 0 ? empty(out.sizes(), DType::Float32) : out.to(DType::Float32);
      gemm<float>(a.to(DType::Float32), b.to(DType::Float32), o32, alpha, beta);
      copy_(out, o32);
      break;
    }
    default:
      visit_dtype(a.dtype(), "mm", [&](auto tag) { gemm_naive<decltype(tag)>(a, b, out, alpha, beta); });
  }
  if (a.size(1) == 0 && beta == 0) zero_(out);
}

Tensor mm_cpu(const Tensor& a, const Tensor& b, const Tensor& out_arg) {
  check_mm(a, b, "mm");
  IntList shape = {a.size(0), b.size(1)};
  Tensor out = out_arg.defined() && out_arg.is_contiguous() && out_arg.sizes() == shape && out_arg.dtype() == a.dtype()
                   ? out_arg : empty(shape, a.dtype());
  addmm_into(out, a, b, 1.0, 0.0);
  if (out_arg.defined() && !out.is_same(out_arg)) {  // out= of another dtype or layout (shape checked in mm_out)
    Tensor dst = out_arg;
    copy_(dst, out);
    return dst;
  }
  return out;
}

// A bias row a linear layer adds: float32 [N] or [1, N], contiguous.
bool is_bias_row(const Tensor& self, int64_t N) {
  if (self.dtype() != DType::Float32 || !self.is_contiguous() || self.numel() != N) return false;
  return self.dim() == 1 || (self.dim() == 2 && self.size(0) == 1);
}

// A linear layer (bias + a @ b, float32): oneDNN adds the bias (and applies `epilogue`) as it writes the
// product, where BLAS would first copy the bias into every row of the output. False when it does not apply.
bool onednn_linear_into(Tensor& out, const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                        const Scalar& alpha, Epilogue epilogue) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32 || beta.to_double() != 1.0 ||
      alpha.to_double() != 1.0 || M == 0 || N == 0 || K == 0 || !is_bias_row(self, N))
    return false;
  // Below this a oneDNN call costs more than the product (its threads woken for a Linear(4, 4) on one row:
  // 18 us, where BLAS and the bias copy take 4), as for mm.
  if (M * K * N < kOnednnMinMacs) return false;
  BlasOperand A = blas_operand(a), B = blas_operand(b);
  return onednn_linear(M, K, N, {static_cast<const float*>(A.t.data_ptr()), A.trans, A.ld},
                       {static_cast<const float*>(B.t.data_ptr()), B.trans, B.ld}, self.data<float>(), epilogue,
                       out.data<float>());
}

Tensor addmm_cpu(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_mm(a, b, "addmm");
  Tensor out = empty({a.size(0), b.size(1)}, a.dtype());
  if (onednn_linear_into(out, self, a, b, beta, alpha, Epilogue::None)) return out;
  const double be = beta.to_double();
  if (be != 0) copy_(out, self);  // broadcasts self (e.g. a bias row)
  addmm_into(out, a, b, alpha.to_double(), be);
  return out;
}

Tensor addmm_activation_cpu(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                            const Scalar& alpha, bool use_gelu) {
  check_mm(a, b, "_addmm_activation");
  Tensor out = empty({a.size(0), b.size(1)}, a.dtype());
  if (onednn_linear_into(out, self, a, b, beta, alpha, use_gelu ? Epilogue::Gelu : Epilogue::Relu)) return out;
  out = addmm_cpu(self, a, b, beta, alpha);
  return use_gelu ? gelu(out) : relu(out);
}

// out[i] = alpha * a[i] @ b[i] + beta * out[i] for float/double batches BLAS reads in place: one description
// for every matrix, pointers stepped by the batch strides (a select() per matrix and operand cost about as
// much as the 64x64x32 GEMMs of attention themselves). False when a or b needs a copy.
template <typename T>
bool batched_gemm(const Tensor& a, const Tensor& b, Tensor& out, double alpha, double beta) {
  // Every matrix of a batch [B, R, C] has the strides of dims 1 and 2.
  const std::optional<InPlaceLayout> A = in_place_layout(a.size(1), a.size(2), a.stride(1), a.stride(2));
  const std::optional<InPlaceLayout> B = in_place_layout(b.size(1), b.size(2), b.stride(1), b.stride(2));
  if (!A || !B) return false;
  const int64_t M = a.size(1), K = a.size(2), N = b.size(2);
  if (M == 0 || N == 0 || K == 0) return false;  // (the general path zeroes as beta asks)
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* pc = static_cast<T*>(out.data_ptr());
  if constexpr (std::is_same<T, float>::value) {
    const int64_t batch = a.size(0);
    if (batch * M * N * K >= kOnednnMinMacs &&
        onednn_gemm({batch, M, K, N}, {pa, A->trans, A->ld, a.stride(0)}, {pb, B->trans, B->ld, b.stride(0)},
                    static_cast<float>(alpha), static_cast<float>(beta), pc))
      return true;
  }
  const auto ta = A->trans ? CblasTrans : CblasNoTrans, tb = B->trans ? CblasTrans : CblasNoTrans;
  for (int64_t i = 0; i < a.size(0); ++i) {
    const T* ai = pa + i * a.stride(0);
    const T* bi = pb + i * b.stride(0);
    T* ci = pc + i * M * N;
    if constexpr (std::is_same<T, float>::value)
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, static_cast<float>(alpha), ai, A->ld, bi, B->ld,
                  static_cast<float>(beta), ci, N);
    else
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, ai, A->ld, bi, B->ld, beta, ci, N);
  }
  return true;
}

Tensor baddbmm_cpu(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_bmm(a, b);
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, a.dtype());
  double be = self.defined() ? beta.to_double() : 0.0;
  if (be != 0) copy_(out, self);
  if (a.dtype() == DType::Float32 && batched_gemm<float>(a, b, out, alpha.to_double(), be)) return out;
  if (a.dtype() == DType::Float64 && batched_gemm<double>(a, b, out, alpha.to_double(), be)) return out;
  for (int64_t i = 0; i < a.size(0); ++i) {
    Tensor o = select(out, 0, i);
    addmm_into(o, select(a, 0, i), select(b, 0, i), alpha.to_double(), be);
  }
  return out;
}

OpKernel<ops::mm> reg_mm(DispatchKey::CPU, &mm_cpu);
OpKernel<ops::addmm> reg_addmm(DispatchKey::CPU, &addmm_cpu);
OpKernel<ops::_addmm_activation> reg_addmm_activation(DispatchKey::CPU, &addmm_activation_cpu);
OpKernel<ops::baddbmm> reg_baddbmm(DispatchKey::CPU, &baddbmm_cpu);

}  // namespace
}  // namespace trainrun
