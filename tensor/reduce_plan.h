#pragma once
// Shared set-up of reductions on every device: the input is laid out as a contiguous
// [outer, inner] matrix whose rows are the reduced elements of one output
// element (a transposing copy only when the reduced dims are not innermost).
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {

struct ReducePlan {
  Tensor rows;          // contiguous, numel == outer * inner
  int64_t outer = 1;    // number of output elements
  int64_t inner = 1;    // elements reduced into each
  IntList out_shape;    // with keepdim applied
  // Builds the plan; `dims` empty means all dims. Throws IndexError for a bad
  // or repeated dim, naming `op`.
  ReducePlan(const Tensor& x, const IntList& dims, bool keepdim, const char* op);
};

// The result dtype of sum/prod/cumsum: the requested one, else the input's
// when floating, else int64 (PyTorch's rule).
DType sum_dtype(DType in, std::optional<DType> requested);
// Which of nd dims `dims` reduce (negative dims wrapped), or nullopt for a bad or repeated dim: for the fast
// paths that fall back to the plan, which then reports the error.
std::optional<std::vector<bool>> reduced_dims(int64_t nd, const IntList& dims);

// A contiguous float32/float64 tensor whose reduction reads it in place as [outer, mid, inner]: its dims fall
// in three runs of consecutive dims, the middle one reduced or kept and the two around it the opposite.
struct BlockSplit {
  int64_t outer = 1, mid = 1, inner = 1;
  IntList out_shape;  // with keepdim applied
};
// x's split for a reduction over `dims` when the middle run (not empty) is the reduced dims (`reduce_middle`)
// or the kept ones, the inner run is not empty, and the outer run is not empty unless `outer_may_be_empty`;
// nullopt otherwise, bad dims included (the rows plan reports those).
std::optional<BlockSplit> block_split(const Tensor& x, const IntList& dims, bool keepdim, bool reduce_middle,
                                      bool outer_may_be_empty);
// Throws IndexError naming `op` when a reduction without an identity (max,
// argmax, ...) would reduce over nothing.
void check_nonempty(const ReducePlan& plan, const char* op);

}  // namespace trainrun
