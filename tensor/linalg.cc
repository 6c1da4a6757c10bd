// Public matrix-product API; composite ops (matmul, mv, dot, outer) reduce
// to mm/bmm so every device only implements those.
#include "tensor/linalg.h"

#include "tensor/autocast.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/reductions.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

// The operands' checks: every device's kernel (and the Meta one) runs them, since the generated Python bindings
// and compiled graphs reach the kernels without the fronts below.
void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  // Under autocast the Autocast kernel casts both to one dtype before any kernel runs.
  TR_CHECK(a.dtype() == b.dtype() || autocast_enabled_for(a.device()), TypeError,
           "{}: expected both matrices to have the same dtype, got {} and {}", op, dtype_name(a.dtype()),
           dtype_name(b.dtype()));
  TR_CHECK(a.device() == b.device(), TypeError, "{}: expected both matrices on one device, got {} and {}", op,
           a.device().str(), b.device().str());
}

}  // namespace

void check_mm(const Tensor& a, const Tensor& b, const char* op) {
  TR_CHECK(a.dim() == 2 && b.dim() == 2, ValueError, "{}: expected 2-D matrices, got shapes {} and {}", op,
           a.shape_str(), b.shape_str());
  TR_CHECK(a.size(1) == b.size(0), ValueError, "{}: shapes {} and {} cannot be multiplied ({}x{} and {}x{})", op,
           a.shape_str(), b.shape_str(), a.size(0), a.size(1), b.size(0), b.size(1));
  check_operands(a, b, op);
}

void check_bmm(const Tensor& a, const Tensor& b) {
  TR_CHECK(a.dim() == 3 && b.dim() == 3, ValueError, "bmm: expected 3-D tensors, got shapes {} and {}", a.shape_str(),
           b.shape_str());
  TR_CHECK(a.size(0) == b.size(0), ValueError, "bmm: batch sizes differ: {} vs {} (shapes {} and {})", a.size(0),
           b.size(0), a.shape_str(), b.shape_str());
  TR_CHECK(a.size(2) == b.size(1), ValueError, "bmm: shapes {} and {} cannot be multiplied ({}x{} and {}x{})",
           a.shape_str(), b.shape_str(), a.size(1), a.size(2), b.size(1), b.size(2));
  check_operands(a, b, "bmm");
}

Tensor mm(const Tensor& a, const Tensor& b) {
  return ops::mm::call(keys_of(a, b), a, b, Tensor());
}
Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b) {
  check_mm(a, b, "mm");
  TR_CHECK(out.dim() == 2 && out.size(0) == a.size(0) && out.size(1) == b.size(1), ValueError,
           "mm: out= has shape {} but the result has shape [{}, {}]", out.shape_str(), a.size(0), b.size(1));
  ops::mm::call(keys_of(a, b, out), a, b, out);
  out.impl()->bump_version();
  return out;
}
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return ops::addmm::call(keys_of(self, a, b), self, a, b, beta, alpha);
}
Tensor addmm_activation(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                        const Scalar& alpha, bool use_gelu) {
  return ops::_addmm_activation::call(keys_of(self, a, b), self, a, b, beta, alpha, use_gelu);
}
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return ops::baddbmm::call(keys_of(self, a, b), self, a, b, beta, alpha);
}
Tensor bmm(const Tensor& a, const Tensor& b) { return baddbmm(Tensor(), a, b, 0, 1); }

Tensor dot(const Tensor& a, const Tensor& b) {
  TR_CHECK(a.dim() == 1 && b.dim() == 1, ValueError, "dot: expected 1-D tensors, got shapes {} and {}", a.shape_str(),
           b.shape_str());
  TR_CHECK(a.size(0) == b.size(0), ValueError, "dot: inconsistent tensor sizes {} and {}", a.size(0), b.size(0));
  return reshape(mm(unsqueeze(a, 0), unsqueeze(b, 1)), {});
}

Tensor mv(const Tensor& a, const Tensor& v) {
  TR_CHECK(a.dim() == 2 && v.dim() == 1, ValueError, "mv: expected a 2-D matrix and a 1-D vector, got shapes {} and {}",
           a.shape_str(), v.shape_str());
  return squeeze(mm(a, unsqueeze(v, 1)), 1);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  TR_CHECK(a.dim() == 1 && b.dim() == 1, ValueError, "outer: expected 1-D tensors, got shapes {} and {}",
           a.shape_str(), b.shape_str());
  return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  const int64_t da = a.dim(), db = b.dim();
  TR_CHECK(da > 0 && db > 0, ValueError, "matmul: both arguments need at least 1 dim, got shapes {} and {}",
           a.shape_str(), b.shape_str());
  int64_t contracted_b = db == 1 ? b.size(0) : b.size(-2);
  TR_CHECK(a.size(-1) == contracted_b, ValueError,
           "matmul: shapes {} and {} cannot be multiplied ({} vs {} in the contracted dim)", a.shape_str(),
           b.shape_str(), a.size(-1), contracted_b);
  if (da == 1 && db == 1) return dot(a, b);
  if (da == 2 && db == 1) return mv(a, b);
  if (da == 1 && db == 2) return squeeze(mm(unsqueeze(a, 0), b), 0);
  if (da == 2 && db == 2) return mm(a, b);
  if (da >= 3 && db <= 2) {
    // Fold the batch into rows: one big GEMM instead of many small ones.
    Tensor b2 = db == 1 ? unsqueeze(b, 1) : b;
    IntList out_shape(a.sizes().begin(), a.sizes().end() - 1);
    if (db == 2) out_shape.push_back(b.size(1));
    Tensor r = mm(reshape(a, {-1, a.size(-1)}), b2);
    return reshape(r, out_shape);
  }
  // General case: broadcast batch dims, then bmm.
  Tensor a2 = da == 1 ? unsqueeze(a, 0) : a;
  Tensor b2 = db == 1 ? unsqueeze(b, 1) : b;
  IntList batch_a(a2.sizes().begin(), a2.sizes().end() - 2), batch_b(b2.sizes().begin(), b2.sizes().end() - 2);
  IntList batch = broadcast_shapes(batch_a, batch_b, "matmul");
  int64_t n = 1;
  for (int64_t s : batch) n *= s;
  // matmul's front checked that the contracted dims agree.
  int64_t M = a2.size(-2), K = a2.size(-1), N = b2.size(-1);
  IntList ea = batch, eb = batch;
  ea.insert(ea.end(), {M, K});
  eb.insert(eb.end(), {K, N});
  Tensor r = bmm(reshape(expand(a2, ea), {n, M, K}), reshape(expand(b2, eb), {n, K, N}));
  IntList out_shape = batch;
  if (da > 1) out_shape.push_back(M);
  if (db > 1) out_shape.push_back(N);
  return reshape(r, out_shape);
}

}  // namespace trainrun
