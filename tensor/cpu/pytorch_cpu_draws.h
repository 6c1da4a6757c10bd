#pragma once
// Random draws on the CPU as PyTorch's CPU kernels make them from its
// generator (tensor/mersenne_twister.h), so that the same seed gives the
// same values:
//
//   uniform   float: the low 24 bits of one 32-bit output (half 11, bfloat16
//             8) times 2^-digits, scaled to [from, to); double: 53 bits of a
//             64-bit draw.
//   normal    a contiguous tensor of 16 or more: all its uniforms first, then
//             Box-Muller over each block of 16 (u1 = 1 - x[j], u2 = x[j + 8]);
//             when 16 does not divide it, the last 16 are redrawn and
//             transformed again. Otherwise one serial Box-Muller value per
//             element from two 53-bit uniforms, the pair's second value kept
//             for the next draw.
//   bernoulli a 53-bit uniform below p.
//   randint   one 32-bit output modulo the range (64-bit when the range needs
//             more than 32 bits), plus the low end.
//
// A draw is numbered over the whole tensor, row-major; a piece of it (a
// DTensor shard, an FSDP parameter's rows) is the same values as that part
// of the whole draw, and the engine moves past the whole draw either way.
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/mersenne_twister.h"
#include "tensor/random_draw.h"

namespace trainrun {

struct DrawRequest {
  RandomDistribution dist;
  double a = 0, b = 0;  // uniform [a, b), normal (mean a, std b), bernoulli p = a, randint [a, b)
  DType dtype = DType::Float32;
  int64_t total = 0;         // elements in the whole draw
  bool contiguous = true;    // whether the tensor drawn into is contiguous (PyTorch's block path for normals)
};

// Writes elements [lo, hi) of the whole draw to out (hi - lo elements of request.dtype, in order).
void draw_pytorch_cpu(MersenneTwister& engine, const DrawRequest& request, int64_t lo, int64_t hi, void* out);

// PyTorch's CPU randperm: 0..n-1, then for i in 0..n-2 swap i with i + (one 32-bit output) % (n - i).
void permutation_pytorch_cpu(MersenneTwister& engine, int64_t n, int64_t* out);

}  // namespace trainrun
