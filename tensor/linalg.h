#pragma once
// Matrix products on OpenBLAS. Transposed views go to BLAS as transposes
// (no copy); float16/bfloat16 compute in float32.
#include "tensor/tensor.h"

namespace trainrun {

Tensor mm(const Tensor& a, const Tensor& b);
Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.matmul: 1-D/2-D/batched, with batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// beta * self + alpha * (a @ b)
// relu(addmm(...)), or gelu(addmm(...)) with use_gelu: one op (ops.yaml's _addmm_activation).
Tensor addmm_activation(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
                        const Scalar& alpha = 1, bool use_gelu = false);
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
             const Scalar& alpha = 1);
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
               const Scalar& alpha = 1);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor mv(const Tensor& a, const Tensor& v);
Tensor outer(const Tensor& a, const Tensor& b);

// The checks every device's mm/addmm (2-D, inner sizes equal) and baddbmm (3-D, equal batches) kernel runs
// first: a clear ValueError/TypeError naming `op` and both shapes, never a BLAS error.
void check_mm(const Tensor& a, const Tensor& b, const char* op);
void check_bmm(const Tensor& a, const Tensor& b);

}  // namespace trainrun
