#pragma once
// Reductions that keep a tensor's trailing dims: the tensor is [outer, mid, inner] in memory, and each of the
// `outer` blocks reduces its `mid` rows of `inner` contiguous elements into one row of the output (a bias's
// gradient, [rows, cols] -> [cols], is one block; pooling over a sequence, [B, T, C].mean(1), is B of them).
// The rows are read in place and in order, where the rows plan (reduce_plan.h) first copied the tensor
// transposed so that the reduced dims came last (2-6x slower).
#include <cstdint>
#include <optional>

#include "tensor/reduce_plan.h"
#include "tensor/tensor.h"

namespace trainrun {

using ColumnBlocks = BlockSplit;

// The blocks of a contiguous float32/float64 x when `dims` are one run of consecutive dims with kept dims
// after it (and kept dims or none before it); nullopt otherwise.
std::optional<ColumnBlocks> column_blocks(const Tensor& x, const IntList& dims, bool keepdim);

// out[o, j] = scale * sum over the block's rows of x[o, r, j], float32 or float64 (x's dtype) read from
// `base`: rows added in blocks of 128 and the blocks' sums combined pairwise, so that neither the thread
// count nor how the columns are split changes a result.
void sum_columns(const ColumnBlocks& b, const Tensor& x, const void* base, Tensor& out, double scale);

// amax (is_max) or amin of each column of each block; a NaN wins, as PyTorch's.
void extreme_columns(const ColumnBlocks& b, const Tensor& x, Tensor& out, bool is_max);

}  // namespace trainrun
