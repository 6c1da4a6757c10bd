#pragma once
// float32 GEMMs through oneDNN's matmul: out = alpha * a @ b (+ bias[N])
// (+ beta * out), then an activation, for one matrix or a batch. The bias
// and the activation are applied as the GEMM writes its output (an
// epilogue), where OpenBLAS needs the bias copied into the output first and
// the activation as one more pass over it. oneDNN also picks its kernels by
// the ISA it finds, where OpenBLAS picks them by a CPU model it may not know
// (OPENBLAS_CORETYPE): on an AVX-512 CPU OpenBLAS took as Haswell, its sgemm
// runs at half oneDNN's speed. Primitives are cached per shape and layout.
#include <cstdint>

namespace trainrun {

// A matrix as BLAS reads it: rows of `ld` elements, or their transpose; in a
// batch, each matrix `batch_stride` elements after the one before.
struct MatrixOperand {
  const float* data;
  bool transposed;
  int64_t ld;
  int64_t batch_stride = 0;
};

// batch products of [M, K] @ [K, N].
struct GemmShape {
  int64_t batch, M, K, N;
};

// What the epilogue applies after the bias.
enum class Epilogue { None, Relu, Gelu, GeluTanh };

// Writes out (contiguous [M, N]); bias may be null. Returns false (and
// computes nothing) when oneDNN has no implementation, so the caller can
// fall back.
bool onednn_linear(int64_t M, int64_t K, int64_t N, MatrixOperand a, MatrixOperand b, const float* bias,
                   Epilogue epilogue, float* out);

// out (contiguous [batch, M, N]) = alpha * a @ b + beta * out, per matrix of
// the batch (a batch of one: [M, N]). False (nothing computed) when oneDNN
// has no implementation or a batch stride is 0 (a broadcast operand).
bool onednn_gemm(GemmShape shape, MatrixOperand a, MatrixOperand b, float alpha, float beta, float* out);

// Below this many multiply-adds per call, oneDNN's per-call cost (about 3 us:
// a stream, memory objects, a scratchpad) outweighs its faster kernel.
constexpr int64_t kOnednnMinMacs = int64_t{1} << 18;

}  // namespace trainrun
